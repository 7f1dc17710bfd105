// Postgres regime: the queue option max_in_redis as a batch sees it (SPEC 1.3, "Flow control at
// the drain": Depth cap): the depth in Redis read before each batch of a capped queue, the batch
// cut to the room left, and the wait while there is none. A pass reads the depths of all its
// capped queues in one round trip; a batch counts from its key's reading (50 ms at most) plus
// the jobs pushed into that key since.
#pragma once
#include "pg_includes.h"

#include "delivery/batch_result.h"
#include "drain/active_queues.h"

// While a capped queue has no room, its depth is read again after this long (and the round
// comes again as soon: drain_worker.cpp).
constexpr long kDepthRecheckMs = 50;

// At the start of pass ctx->pass: lists the capped queues among queues[0..count) that it will
// try (pending, not delivered by group) and reads the depths of those due (not waiting for a
// recheck) in one round trip (one per Cluster master), each key once. A queue whose reading goes
// stale later in the pass reads again with the next of the list. Not Ok: the round trip failed
// (its connection is closed).
jobbuf::redis::SessionReport read_pass_depths(DrainContext* ctx, const ActiveQueue* const* queues,
                                              QueueProgress* const* progress, int count);

// Lowers *limit to the room q's cap leaves: the cap less its key's depth as read within the last
// kDepthRecheckMs (with the pass's other capped queues, or now on its own) plus the jobs pushed
// into that key since, by any queue. False when there is none, with result->outcome DepthCapped
// (or the failure's outcome when the read failed); true at once for a queue without max_in_redis.
bool depth_room_for(DrainContext* ctx, const ActiveQueue* q, QueueProgress* progress, int* limit, BatchResult* result);

// A batch of q pushed jobs into its key: they count in its depth until it is read again.
void depth_spent(const ActiveQueue* q, int64 jobs);

// A batch of q may or may not have reached Redis: its key's depth is read again before the next.
void depth_unknown(const ActiveQueue* q);

// The same for a queue with delivery "group", in the current transaction: its depth is the jobs
// of groups pushed and not yet completed or failed, counted in jobbuf.jobs (no Redis read).
bool group_depth_room_for(const ActiveQueue* q, QueueProgress* progress, int* limit, BatchResult* result);
