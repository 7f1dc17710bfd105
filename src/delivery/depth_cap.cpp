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
    long long depth = 0;
    SessionReport report = jobbuf::redis::drain_session_depth(ctx->session, *ctx->waiter, q->target, &depth);
    ctx->waiter->raise_pending();
    if (report.status != SessionReport::Status::Ok) {
        result->outcome = outcome_of(report.status);
        set_batch_message(result, report.message);
        return false;
    }
    return room_at_depth(cap, depth, now, progress, limit, result);
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
