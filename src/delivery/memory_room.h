// Postgres regime: the Redis memory guard as a batch sees it (SPEC 1.3, "Flow control at the
// drain"; the guard itself is redis/session_memory.cpp): the room the next unit may fill, the
// wait while the node is at its limit, and the guard's lines in the log and in
// jobbuf_worker_status().last_error.
#pragma once
#include "pg_includes.h"

#include "delivery/batch_result.h"
#include "drain/active_queues.h"

// The room of the Redis node that q's next unit goes to (*room; unlimited when no limit
// applies). False when nothing may be sent now, with result->outcome set: MemoryFull while the
// node is at its limit (or refused for evicting), the failure's outcome when reading INFO failed.
bool memory_room_for(DrainContext* ctx, const ActiveQueue* q, jobbuf::redis::MemoryRoom* room, BatchResult* result);
