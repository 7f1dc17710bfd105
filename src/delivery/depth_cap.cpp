// Postgres regime: the depth cap of a batch (see depth_cap.h).
#include "pg_includes.h"

#include "delivery/depth_cap.h"
#include "support/kept_plan.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

namespace {

SPIPlanPtr claimed_plan = nullptr;

// Whether the cap holds at depth (read at now): otherwise *limit is lowered to the room left.
bool room_at_depth(long long cap, long long depth, TimestampTz now, QueueProgress* progress, int* limit,
                   BatchResult* result)
{
    result->depth_read = true;
    result->depth = depth;
    if (depth >= cap) {
        progress->capped_until = TimestampTzPlusMilliseconds(now, kDepthRecheckMs);
        result->outcome = BatchOutcome::DepthCapped;
        return false;
    }
    progress->capped_until = 0;
    *limit = static_cast<int>(Min(static_cast<long long>(*limit), cap - depth));
    return true;
}

}  // namespace

using jobbuf::redis::SessionReport;

bool depth_room_for(DrainContext* ctx, const ActiveQueue* q, QueueProgress* progress, int* limit, BatchResult* result)
{
    long long cap = jobbuf::redis::queue_target_max_in_redis(q->target);
    if (cap <= 0)
        return true;
    TimestampTz now = GetCurrentTimestamp();
    if (now < progress->capped_until) {
        result->outcome = BatchOutcome::DepthCapped;
        return false;
    }
    if (progress->depth_pass != ctx->pass) {
        long long depth = 0;
        SessionReport report = jobbuf::redis::drain_session_depth(ctx->session, *ctx->waiter, q->target, &depth);
        ctx->waiter->raise_pending();
        if (report.status != SessionReport::Status::Ok) {
            result->outcome = outcome_of(report.status);
            set_batch_message(result, report.message);
            return false;
        }
        progress->depth = depth;
        progress->depth_pass = ctx->pass;
    }
    return room_at_depth(cap, progress->depth, now, progress, limit, result);
}

void read_pass_depths(DrainContext* ctx, const ActiveQueue* const* queues, QueueProgress* const* progress, int count)
{
    TimestampTz now = GetCurrentTimestamp();
    auto* targets = static_cast<const jobbuf::redis::QueueTarget**>(palloc(sizeof(void*) * Max(count, 1)));
    auto* read_into = static_cast<QueueProgress**>(palloc(sizeof(void*) * Max(count, 1)));
    int n = 0;
    for (int i = 0; i < count; i++) {
        if (!progress[i]->pending || queues[i]->group_delivery || now < progress[i]->capped_until ||
            jobbuf::redis::queue_target_max_in_redis(queues[i]->target) <= 0)
            continue;
        targets[n] = queues[i]->target;
        read_into[n++] = progress[i];
    }
    if (n > 1) {  // (one queue reads its own in the same one round trip)
        auto* depths = static_cast<long long*>(palloc(sizeof(long long) * n));
        auto* read = static_cast<bool*>(palloc(sizeof(bool) * n));
        SessionReport report = jobbuf::redis::drain_session_depths(ctx->session, *ctx->waiter, targets,
                                                                   static_cast<std::size_t>(n), depths, read);
        ctx->waiter->raise_pending();
        for (int i = 0; i < n && report.status == SessionReport::Status::Ok; i++)
            if (read[i]) {
                read_into[i]->depth = depths[i];
                read_into[i]->depth_pass = ctx->pass;
            }
        pfree(depths);
        pfree(read);
    }
    pfree(targets);
    pfree(read_into);
}

void depth_spent(const DrainContext* ctx, QueueProgress* progress, int64 jobs)
{
    if (progress->depth_pass == ctx->pass)
        progress->depth += jobs;
}

bool group_depth_room_for(const ActiveQueue* q, QueueProgress* progress, int* limit, BatchResult* result)
{
    long long cap = jobbuf::redis::queue_target_max_in_redis(q->target);
    if (cap <= 0)
        return true;
    TimestampTz now = GetCurrentTimestamp();
    if (now < progress->capped_until) {
        result->outcome = BatchOutcome::DepthCapped;
        return false;
    }
    // Claimed jobs are only in jobs_leased (queue, lease_until) WHERE group_id IS NOT NULL: the
    // count reads the queue's groups in flight, never its waiting jobs.
    Oid types[1] = {TEXTOID};
    kept_plan(&claimed_plan,
              "SELECT pg_catalog.count(*) FROM jobbuf.jobs j"
              " WHERE j.queue OPERATOR(pg_catalog.=) $1 AND j.group_id IS NOT NULL",
              1, types);
    Datum args[1] = {CStringGetTextDatum(q->name)};
    execute_kept(claimed_plan, args, nullptr, true, SPI_OK_SELECT, "counting a queue's claimed jobs");
    bool isnull = false;
    long long depth = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    return room_at_depth(cap, depth, now, progress, limit, result);
}
