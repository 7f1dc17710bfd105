// Postgres regime: what jobbuf_flow_status() reads from the drain worker (SPEC 1.3, "Flow
// control at the drain": Visible). The worker notes each queue it holds back (the Redis memory
// guard, max_in_redis, max_rate) and each queue whose target the Redis in use refuses, in its
// memory, at no cost to the batch; between batches it writes what changed into
// jobbuf.queue_flow, on a transition at once and otherwise at most once a second per held queue,
// and deletes a queue's row once it has not been held back for 10 s. The memory guard's last
// reading per Redis node goes into jobbuf.redis_memory at most once a second (what
// jobbuf_prometheus_redis_memory() shows). Both writes take their tables without waiting and
// are retried later when they cannot: no other session makes the worker wait on them.
#pragma once
#include "pg_includes.h"

#include "redis/drain_session.h"

enum class FlowHold { RedisMemory, DepthCap, RateLimited };

// A batch of queue was held back for why (depth: the depth in Redis just read, -1 when not read
// now; reason: what held it, for jobbuf_flow_status().reason).
void note_flow_held(const char* queue, FlowHold why, long long depth, const char* reason);

// Whether the Redis in use refuses queue's target (reason; nullptr: it does not).
void note_flow_refused(const char* queue, const char* reason);

// Writes what changed (see above) when due; outside any transaction. May raise an ERROR (the
// caller guards it).
void publish_flow_if_due(const jobbuf::redis::DrainSession* session);

// Milliseconds until publish_flow_if_due has something to do (LONG_MAX: nothing pending).
long flow_due_in_ms(void);
