// Postgres regime: one drain batch (see drain_batch.h).
//
// A batch is one Postgres transaction around one Redis unit (the first batch of a full pass is
// preceded by one that releases expired claims, expired_claims.h):
//   1. delete the oldest ready jobs of a queue, skipping rows other transactions hold, and keep
//      what Redis needs of them (job_taker.h; the SQL statement below when the table is not as
//      the extension created it);
//   2. push them with MULTI ... SET <marker> <their ids> EXEC;
//   3. dead-letter the jobs Redis rejected, count the rest, COMMIT.
// If Redis fails, the transaction aborts and the jobs stay staged. If Postgres fails after the
// EXEC, the marker names the batch and reconcile_delivered (reconcile.cpp) deletes those jobs
// instead of pushing them again: the job reaches Redis once.
#include "pg_includes.h"

#include "support/kept_plan.h"

#include "census/queue_census.h"
#include "config/settings.h"
#include "delivery/delivery_attempt.h"
#include "delivery/delivery_counter.h"
#include "delivery/delivery_stats.h"
#include "delivery/depth_cap.h"
#include "delivery/drain_batch.h"
#include "delivery/fair_taker.h"
#include "delivery/memory_room.h"
#include "delivery/job_taker.h"
#include "delivery/own_keys.h"
#include "delivery/rate_limit.h"
#include "delivery/taken_batch.h"
#include "drain/active_queues.h"
#include "drain/expired_claims.h"
#include "metadata/installation_identity.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "catalog/pg_type.h"
#include "nodes/params.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
}

using jobbuf::redis::JobResult;
using jobbuf::redis::SessionReport;
using jobbuf::redis::StagedJob;

namespace {

SPIPlanPtr take_plan = nullptr;
SPIPlanPtr dead_plan = nullptr;

void prepare_plans(void)
{
    {
        Oid types[7] = {TEXTOID, INT4OID, TEXTARRAYOID, INT8OID, BOOLOID, TEXTOID, UUIDOID};
        kept_plan(
            &take_plan,
            // Written so that the plan cannot depend on statistics (it is made once, often
            // while the table is empty): "queue <= $1 AND (queue, owner) <= ($1, $7) AND
            // (queue, owner, id) > ($1, $7, $4)" means queue = $1, owner = $7 (this installation:
            // held jobs are never taken) and id > $4, but only jobs_waiting (queue, owner, id) can
            // serve it, and the scan starts right at ($1, $7, $4) (with "queue = $1" btree would start at the queue's first entry
            // and step over every one the cursor already passed); id = ANY(array) can only be a
            // probe of jobs_pkey, where a join could become a nested loop over the whole backlog.
            // Schema-qualified throughout, operators included (see worker_session.cpp).
            "WITH picked AS ("
            "  SELECT j.id FROM jobbuf.jobs j"
            "  WHERE j.queue OPERATOR(pg_catalog.<=) $1 AND (j.queue, j.owner) OPERATOR(pg_catalog.<=) ($1, $7)"
            "    AND (j.queue, j.owner, j.id) OPERATOR(pg_catalog.>) ($1, $7, $4)"
            "    AND j.group_id IS NULL AND ($5 OR j.run_at OPERATOR(pg_catalog.<=) pg_catalog.now())"
            "  ORDER BY j.queue, j.owner, j.id LIMIT $2 FOR UPDATE SKIP LOCKED"
            ")"
            // A top-level DELETE: its RETURNING rows go straight to SPI, with no CTE tuplestore
            // and no sort (the probe of jobs_pkey returns them in id order; take_batch checks).
            " DELETE FROM jobbuf.jobs j WHERE j.id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT p.id FROM picked p))"
            " RETURNING j.id,"
            // The keys the target writes itself ($3) are dropped from the payload, only when present.
            "  CASE WHEN j.payload OPERATOR(pg_catalog.?|) $3"
            "       THEN (j.payload OPERATOR(pg_catalog.-) $3)::text"
            "       ELSE j.payload::text END,"
            "  pg_catalog.date_part('epoch', j.staged_at), pg_catalog.date_part('epoch', j.run_at),"
            "  coalesce(j.payload OPERATOR(pg_catalog.?) $6, false),"
            "  j.payload, j.partition_key, j.unique_key, j.staged_at, j.attempts, j.origin, j.tick_id",
            7, types);
    }
    {
        // The job's origin goes with it (jobbuf_retry_dead stages it again with the ids consumers
        // saw); its owner is this installation (the only one whose jobs the worker takes): the default.
        Oid types[9] = {INT8OID, TEXTOID, JSONBOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID, TEXTOID, UUIDOID};
        kept_plan(
            &dead_plan,
            "INSERT INTO jobbuf.dead (id, queue, payload, partition_key, unique_key, staged_at,"
            "                         attempts, last_error, errors, origin)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7 OPERATOR(pg_catalog.+) 1, $8,"
            "         pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object('at', pg_catalog.now(), 'error', $8)), $9)"
            " ON CONFLICT (id) DO NOTHING",
            9, types);
    }
}

void dead_letter(const TakenBatch& taken, uint64 row, const char* queue, const char* error)
{
    const TakenJobRecord& record = taken.records[row];
    Datum values[9] = {Int64GetDatum(taken.jobs[row].id),
                       CStringGetTextDatum(queue),
                       PointerGetDatum(DatumGetJsonbP(record.payload)),  // as stored: detoasted here
                       record.partition_key,
                       record.unique_key,
                       TimestampTzGetDatum(record.staged_at),
                       Int32GetDatum(record.attempts),
                       CStringGetTextDatum(error),
                       UUIDPGetDatum(&record.origin)};
    char nulls[9] = {' ', ' ', ' ', record.partition_key == 0 ? 'n' : ' ', record.unique_key == 0 ? 'n' : ' ', ' ',
                     ' ', ' ', ' '};
    execute_kept(dead_plan, values, nulls, false, SPI_OK_INSERT, "dead-letter insert");
}

// Takes the batch into *taken: by partition for a fair_by queue (fair_taker.h), directly when the
// table allows it (job_taker.h), otherwise with the batch statement, whose rows go straight into
// *taken (taken_batch.h), in id order (a table that is not as created loses fair_by's order). The
// statement cannot stop at a byte bound: when its rows overflow it, taken->overflowed says to take
// again with fewer.
void take_batch(const ActiveQueue* q, int limit, const QueueProgress* progress, TakeBounds bounds, TakenBatch* taken)
{
    const jobbuf::redis::TargetTraits& target = *q->traits;
    int64 after_id = progress->after_id;
    if (q->fair_by_partition && take_jobs_fairly(q->name, target, limit, progress, bounds, taken))
        return;
    if (take_jobs_directly(q->name, target, limit, after_id, bounds, taken))
        return;
    pg_uuid_t* own = static_cast<pg_uuid_t*>(palloc(sizeof(pg_uuid_t)));
    if (!own_installation_id(own))
        elog(ERROR, "jobbuf: the installed SQL has no installation identity");
    ParamListInfo params = makeParamList(7);
    const Oid types[7] = {TEXTOID, INT4OID, TEXTARRAYOID, INT8OID, BOOLOID, TEXTOID, UUIDOID};
    const Datum values[7] = {CStringGetTextDatum(q->name),
                             Int32GetDatum(limit),
                             own_keys_array(target),
                             Int64GetDatum(after_id),
                             BoolGetDatum(target.carries_run_at),
                             target.probed_key != nullptr ? CStringGetTextDatum(target.probed_key) : Datum(0),
                             UUIDPGetDatum(own)};
    for (int i = 0; i < 7; i++) {
        params->params[i].value = values[i];
        params->params[i].isnull = i == 5 && target.probed_key == nullptr;
        params->params[i].pflags = PARAM_FLAG_CONST;
        params->params[i].ptype = types[i];
    }
    SPIExecuteOptions options;
    memset(&options, 0, sizeof(options));
    options.params = params;
    options.dest = create_taken_batch_receiver(taken, static_cast<uint64>(limit), bounds);
    int rc = SPI_execute_plan_extended(take_plan, &options);
    if (rc != SPI_OK_DELETE_RETURNING)
        elog(ERROR, "jobbuf: taking a batch failed: %s", SPI_result_code_string(rc));
    taken->lowest_passed_over = after_id + 1;  // the statement does not say which rows it passed over
    sort_taken_batch(taken);
    if (taken->count > 0)
        taken->cursor_after = taken->jobs[taken->count - 1].id;
}

// The batch committed: the queue's cursor (and a fair_by queue's partition walks) move past it.
void batch_committed(QueueProgress* progress, const TakenBatch& taken)
{
    if (taken.partitions != nullptr)
        fair_take_committed(progress, taken);
    else if (taken.cursor_after > 0)
        progress->after_id = taken.cursor_after;
}

}  // namespace

// Rewrites the marker to name only the jobs Redis took (results Delivered): a rejected job must
// not be named, or reconciliation would later delete it (for example after jobbuf_retry_dead put
// it back with the same id) as if it were in Redis.
static SessionReport mark_only_delivered(DrainContext* ctx, const StagedJob* jobs, const JobResult* results,
                                         uint64 count)
{
    auto* ids = static_cast<int64*>(palloc(sizeof(int64) * count));
    auto* staged = static_cast<double*>(palloc(sizeof(double) * count));
    size_t n = 0;
    for (uint64 i = 0; i < count; i++)
        if (results[i] == JobResult::Delivered) {
            staged[n] = jobs[i].staged_at;
            ids[n++] = jobs[i].id;
        }
    SessionReport report = jobbuf::redis::drain_session_write_marker(
        ctx->session, *ctx->waiter, reinterpret_cast<const std::int64_t*>(ids), staged, n);
    ctx->waiter->raise_pending();
    pfree(ids);
    pfree(staged);
    return report;
}

BatchResult drain_one_batch(DrainContext* ctx, const ActiveQueue* q, QueueProgress* progress)
{
    BatchResult result{};
    int limit = q->batch_size > 0 ? q->batch_size : jobbuf_batch_size;
    TakeBounds bounds = {static_cast<size_t>(jobbuf_batch_max_bytes),
                         Min(jobbuf::redis::drain_session_max_bulk_bytes(ctx->session), kMaxJobTextBytes)};

    // The first batch from a restarted cursor (a full pass) first hands the jobs of expired claims
    // back to the drain, below the cursor if need be (expired_claims.h).
    if (progress->restarted && !release_expired_claims(q, limit, progress, &result))
        return result;
    // The Redis memory guard: nothing while the node is at its limit, never more text than its room.
    jobbuf::redis::MemoryRoom room;
    if (!memory_room_for(ctx, q, &room, &result))
        return result;
    if (room.limited)
        bounds.batch_bytes = Min(bounds.batch_bytes, room.room_bytes);
    // max_in_redis: never more jobs than the cap leaves room for.
    if (!depth_room_for(ctx, q, progress, &limit, &result))
        return result;
    // max_rate: never more jobs than its token bucket holds.
    if (!rate_room_for(q, &limit, &result))
        return result;

    TakenBatch taken;
    for (;;) {
        if (!begin_delivery_transaction("jobbuf: delivering a batch", &result))
            return result;
        prepare_plans();
        TimestampTz take_start = GetCurrentTimestamp();
        take_batch(q, limit, progress, bounds, &taken);
        result.take_us += GetCurrentTimestamp() - take_start;
        if (!taken.overflowed)
            break;
        abort_worker_transaction();  // the statement took more than fits: again, with fewer
        limit = static_cast<int>(taken.count);
    }
    progress->lowest_passed_over = Min(progress->lowest_passed_over, taken.lowest_passed_over);
    if (!queue_list_still_current(&result))
        return result;
    uint64 count = taken.count;
    if (count == 0) {
        commit_worker_transaction();
        batch_committed(progress, taken);
        result.outcome = taken.partitions_left ? BatchOutcome::Full : BatchOutcome::Empty;
        return result;
    }
    const StagedJob* jobs = taken.jobs;
    size_t text_bytes = 0;
    for (uint64 i = 0; i < count; i++)
        text_bytes += jobs[i].payload.size();
    // The take's first job always goes, whatever its size: one longer than the room waits for
    // room, and one longer than the limit itself never fits (a dead letter that says so).
    if (room.limited && text_bytes > room.room_bytes) {
        if (count == 1 && text_bytes > room.limit_bytes) {
            char error[jobbuf::redis::kMessageLen];
            snprintf(error, sizeof(error),
                     "the job's %zu bytes are more than jobbuf.redis_memory_limit allows this Redis to hold "
                     "(" UINT64_FORMAT " bytes)",
                     text_bytes, static_cast<uint64>(room.limit_bytes));
            dead_letter(taken, 0, q->name, error);
            record_batch(q->name, 0, 1, error);
            commit_worker_transaction();
            batch_committed(progress, taken);
            ereport(WARNING, (errmsg("jobbuf: a job of queue \"%s\" moved to jobbuf.dead", q->name),
                              errdetail("%s", error)));
            result.outcome = BatchOutcome::Partial;
            return result;
        }
        abort_worker_transaction();  // the job stays staged until the room is there
        result.outcome = BatchOutcome::MemoryFull;
        return result;
    }

    auto* results = static_cast<JobResult*>(palloc(sizeof(JobResult) * count));
    char reject_message[jobbuf::redis::kMessageLen];
    SessionReport report =
        jobbuf::redis::drain_session_deliver(ctx->session, *ctx->waiter, q->target, jobs, count, now_epoch_seconds(),
                                             results, reject_message, sizeof(reject_message));
    ctx->waiter->raise_pending();  // back in the Postgres regime: an ERROR a wait caught goes on here
    if (report.status != SessionReport::Status::Ok) {
        // Nothing of this unit ran (Refused), or we cannot know (connection lost): the DELETE
        // rolls back and the marker, if the EXEC did run, lets reconciliation finish the job.
        abort_worker_transaction();
        depth_unknown(q);
        result.outcome = outcome_of(report.status);
        result.reconcile_needed = report.status != SessionReport::Status::Refused;
        set_batch_message(&result, report.message);
        return result;
    }

    int64 delivered = 0, rejected = 0, retry = 0, unsent = 0;
    for (uint64 i = 0; i < count; i++) {
        if (results[i] == JobResult::Delivered)
            delivered++;
        else if (results[i] == JobResult::Retry)
            retry++;
        else
            rejected++;  // Rejected by Redis, or TooLarge (never sent): dead letters
        if (results[i] == JobResult::TooLarge)
            unsent++;
    }

    if (retry > 0 || rejected > unsent) {
        // The marker of the unit names every job sent (a TooLarge job was neither sent nor named):
        // make it name only what Redis took before anything commits. With jobs to retry, roll back: reconciliation deletes exactly the
        // delivered ones, the others stay staged.
        SessionReport rewrite = mark_only_delivered(ctx, jobs, results, count);
        if (retry > 0 || rewrite.status != SessionReport::Status::Ok) {
            abort_worker_transaction();
            result.outcome =
                rewrite.status == SessionReport::Status::Ok ? BatchOutcome::Refused : outcome_of(rewrite.status);
            result.reconcile_needed = true;
            set_batch_message(&result, retry > 0 ? "Redis refused part of a batch; the refused jobs stay staged"
                                                 : rewrite.message);
            return result;
        }
    }

    for (uint64 i = 0; i < count; i++) {
        if (results[i] != JobResult::Rejected && results[i] != JobResult::TooLarge)
            continue;
        char job_error[jobbuf::redis::kMessageLen];
        jobbuf::redis::drain_session_job_error(ctx->session, i, job_error, sizeof(job_error));
        dead_letter(taken, i, q->name, job_error);
    }
    jobbuf::redis::drain_session_memory_spent(ctx->session, q->target, text_bytes, count);
    record_batch(q->name, delivered, rejected, rejected > 0 ? reject_message : nullptr);
    // The unit's delivery number, committed with the batch (delivery_counter.h).
    record_delivery_number(jobbuf::redis::drain_session_unit_number(ctx->session));
    note_delivered_jobs(q->name, jobs, results, count, now_epoch_seconds());
    commit_worker_transaction();
    batch_committed(progress, taken);
    publish_batch_counters(delivered);
    rate_spent(q, delivered + rejected);
    depth_spent(q, delivered);
    if (rejected > 0) {
        ereport(WARNING, (errmsg("jobbuf: Redis rejected " INT64_FORMAT " job(s) of queue \"%s\"; moved to jobbuf.dead",
                                 rejected, q->name),
                          errdetail("%s", reject_message)));
    }
    result.outcome =
        count == static_cast<uint64>(limit) || taken.full_by_bytes || taken.partitions_left ? BatchOutcome::Full
                                                                                            : BatchOutcome::Partial;
    return result;
}
