// Postgres regime: the queue option max_in_redis as a batch sees it (SPEC 1.3, "Flow control at
// the drain": Depth cap): the depth in Redis read before each batch of a capped queue, the batch
// cut to the room left, and the wait while there is none. A pass reads the depths of all its
// capped queues in one round trip; each of their batches in that pass counts from that reading.
#pragma once
#include "pg_includes.h"

#include "delivery/batch_result.h"
#include "drain/active_queues.h"

// While a capped queue has no room, its depth is read again after this long (and the round
// comes again as soon: drain_worker.cpp).
constexpr long kDepthRecheckMs = 50;

// At the start of pass ctx->pass: reads the depths of the capped queues among queues[0..count)
// that will ask for room in it (pending, not delivered by group, not waiting for a recheck) in
// one round trip (one per Cluster master). A queue it could not read reads its own (below);
// a failed round trip is left to that read to report.
void read_pass_depths(DrainContext* ctx, const ActiveQueue* const* queues, QueueProgress* const* progress,
                      int count);

// Lowers *limit to the room q's cap leaves: the cap less the depth read in this pass (by
// read_pass_depths, or now) and the jobs pushed since. False when there is none, with
// result->outcome DepthCapped (or the failure's outcome when the read failed); true at once for
// a queue without max_in_redis.
bool depth_room_for(DrainContext* ctx, const ActiveQueue* q, QueueProgress* progress, int* limit, BatchResult* result);

// A batch of q pushed jobs into its key: the depth its next batch in this pass counts from.
void depth_spent(const DrainContext* ctx, QueueProgress* progress, int64 jobs);

// The same for a queue with delivery "group", in the current transaction: its depth is the jobs
// of groups pushed and not yet completed or failed, counted in jobbuf.jobs (no Redis read).
bool group_depth_room_for(const ActiveQueue* q, QueueProgress* progress, int* limit, BatchResult* result);
