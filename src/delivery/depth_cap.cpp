// Postgres regime: the depth cap of a batch (see depth_cap.h).
#include "pg_includes.h"

#include "delivery/depth_cap.h"

extern "C" {
#include "utils/timestamp.h"
}

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
