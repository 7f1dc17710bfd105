// Postgres regime: group delivery ('delivery': 'group'): claim one group with jobbuf_claim and
// push one message for it.
#pragma once
#include "pg_includes.h"

#include "delivery/batch_result.h"
#include "drain/active_queues.h"

// Full when a group was pushed, Empty when nothing could be claimed. Errors propagate.
BatchResult drain_one_group(DrainContext* ctx, const ActiveQueue* q, QueueProgress* progress);
