// Postgres regime: one drain batch (see drain_batch.h).
//
// A batch is one Postgres transaction around one Redis unit:
//   1. DELETE the oldest ready jobs of a queue (FOR UPDATE SKIP LOCKED) RETURNING them;
//   2. push them with MULTI ... SET <marker> <their ids> EXEC;
//   3. dead-letter the jobs Redis rejected, count the rest, COMMIT.
// If Redis fails, the transaction aborts and the jobs stay staged. If Postgres fails after the
// EXEC, the marker names the batch and reconcile_delivered (reconcile.cpp) deletes those jobs
// instead of pushing them again: the job reaches Redis once.
#include "pg_includes.h"

#include <algorithm>
#include <new>

#include "delivery_stats.h"
#include "drain_batch.h"
#include "settings.h"
#include "worker_transaction.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
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
    if (take_plan == nullptr) {
        Oid types[4] = {TEXTOID, INT4OID, BOOLOID, INT8OID};
        take_plan = prepare_kept(
            // Written so that the plan cannot depend on statistics (it is made once, often
            // while the table is empty): "queue <= $1 AND (queue, id) > ($1, $4)" means queue = $1
            // and id > $4, but only jobs_waiting (queue, id) can serve it, and the scan starts
            // right at ($1, $4) (with "queue = $1" btree would start at the queue's first entry
            // and step over every one the cursor already passed); id = ANY(array) can only be a
            // probe of jobs_pkey, where a join could become a nested loop over the whole backlog.
            "WITH picked AS ("
            "  SELECT id FROM jobbuf.jobs"
            "  WHERE queue <= $1 AND (queue, id) > ($1, $4) AND group_id IS NULL AND ($3 OR run_at <= now())"
            "  ORDER BY queue, id LIMIT $2 FOR UPDATE SKIP LOCKED"
            ")"
            // A top-level DELETE: its RETURNING rows go straight to SPI, with no CTE tuplestore
            // and no sort (the probe of jobs_pkey returns them in id order; take_batch checks).
            " DELETE FROM jobbuf.jobs j WHERE j.id = ANY (ARRAY(SELECT p.id FROM picked p))"
            " RETURNING j.id,"
            // Sidekiq: keys jobbuf sets itself are dropped from the payload, only when present.
            "  CASE WHEN $3 AND j.payload ?| '{queue,jid,created_at,enqueued_at}'"
            "       THEN (j.payload - '{queue,jid,created_at,enqueued_at}'::text[])::text"
            "       ELSE j.payload::text END,"
            "  date_part('epoch', j.staged_at), date_part('epoch', j.run_at),"
            "  $3 AND j.payload ? 'retry',"
            "  j.payload, j.partition_key, j.unique_key, j.staged_at, j.attempts",
            4, types);
    }
    if (dead_plan == nullptr) {
        Oid types[8] = {INT8OID, TEXTOID, JSONBOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID, TEXTOID};
        dead_plan = prepare_kept(
            "INSERT INTO jobbuf.dead (id, queue, payload, partition_key, unique_key, staged_at,"
            "                         attempts, last_error, errors)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7 + 1, $8,"
            "         jsonb_build_array(jsonb_build_object('at', now(), 'error', $8)))"
            " ON CONFLICT (id) DO NOTHING",
            8, types);
    }
}

void dead_letter(SPITupleTable* taken, uint64 row, const char* queue, const char* error)
{
    HeapTuple tuple = taken->vals[row];
    TupleDesc desc = taken->tupdesc;
    Datum values[8];
    char nulls[8];
    // Result columns 1 (id), 6 (payload), 7 (partition_key), 8 (unique_key), 9 (staged_at),
    // 10 (attempts) of take_plan, in dead_plan's parameter order.
    const int columns[8] = {1, 0, 6, 7, 8, 9, 10, 0};
    for (int i = 0; i < 8; i++) {
        bool isnull = false;
        if (columns[i] > 0)
            values[i] = SPI_getbinval(tuple, desc, columns[i], &isnull);
        nulls[i] = isnull ? 'n' : ' ';
    }
    values[1] = CStringGetTextDatum(queue);
    values[7] = CStringGetTextDatum(error);
    nulls[1] = nulls[7] = ' ';
    int rc = SPI_execute_plan(dead_plan, values, nulls, false, 0);
    if (rc != SPI_OK_INSERT)
        elog(ERROR, "jobbuf: dead-letter insert failed: %s", SPI_result_code_string(rc));
}

int64 taken_id(SPITupleTable* taken, uint64 row)
{
    bool isnull = false;
    return DatumGetInt64(SPI_getbinval(taken->vals[row], taken->tupdesc, 1, &isnull));
}

// Puts the taken rows in id order (the order a batch is pushed in) unless they already are:
// they come in the order of the DELETE's index probe, which is id order in every plan the worker
// allows, so this is a check that costs one comparison per row.
void sort_by_id(SPITupleTable* taken, uint64 count)
{
    bool sorted = true;
    for (uint64 i = 1; i < count && sorted; i++)
        sorted = taken_id(taken, i - 1) < taken_id(taken, i);
    if (sorted)
        return;
    std::sort(taken->vals, taken->vals + count, [taken](HeapTuple a, HeapTuple b) {
        bool isnull = false;
        return DatumGetInt64(SPI_getbinval(a, taken->tupdesc, 1, &isnull)) <
               DatumGetInt64(SPI_getbinval(b, taken->tupdesc, 1, &isnull));
    });
}

}  // namespace

BatchResult drain_one_batch(DrainContext* ctx, const ActiveQueue* q, int64* after_id)
{
    BatchResult result{};
    int limit = q->batch_size > 0 ? q->batch_size : jobbuf_batch_size;
    bool sidekiq = q->spec.kind == static_cast<int>(jobbuf::redis::QueueTarget::Kind::Sidekiq);

    begin_worker_transaction("jobbuf: delivering a batch");
    if (!lock_jobbuf_tables()) {
        abort_worker_transaction();
        result.outcome = BatchOutcome::Locked;
        return result;
    }
    prepare_plans();

    Datum args[4] = {CStringGetTextDatum(q->name), Int32GetDatum(limit), BoolGetDatum(sidekiq),
                     Int64GetDatum(*after_id)};
    TimestampTz take_start = GetCurrentTimestamp();
    int rc = SPI_execute_plan(take_plan, args, nullptr, false, 0);
    result.take_us = GetCurrentTimestamp() - take_start;
    if (rc != SPI_OK_DELETE_RETURNING)
        elog(ERROR, "jobbuf: taking a batch failed: %s", SPI_result_code_string(rc));
    uint64 count = SPI_processed;
    SPITupleTable* taken = SPI_tuptable;
    if (count == 0) {
        commit_worker_transaction();
        result.outcome = BatchOutcome::Empty;
        return result;
    }

    sort_by_id(taken, count);
    auto* jobs = static_cast<StagedJob*>(palloc(sizeof(StagedJob) * count));
    for (uint64 i = 0; i < count; i++) {
        HeapTuple tuple = taken->vals[i];
        TupleDesc desc = taken->tupdesc;
        bool isnull = false;
        StagedJob* job = new (&jobs[i]) StagedJob();
        job->id = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
        text* payload = DatumGetTextPP(SPI_getbinval(tuple, desc, 2, &isnull));
        job->payload = std::string_view(VARDATA_ANY(payload), VARSIZE_ANY_EXHDR(payload));
        job->staged_at = DatumGetFloat8(SPI_getbinval(tuple, desc, 3, &isnull));
        job->run_at = DatumGetFloat8(SPI_getbinval(tuple, desc, 4, &isnull));
        job->payload_has_retry = DatumGetBool(SPI_getbinval(tuple, desc, 5, &isnull));
    }

    auto* results = static_cast<JobResult*>(palloc(sizeof(JobResult) * count));
    char reject_message[jobbuf::redis::kMessageLen];
    SessionReport report = jobbuf::redis::drain_session_deliver(
        ctx->session, *ctx->waiter, q->spec, jobs, count, now_epoch_seconds(), results,
        reject_message, sizeof(reject_message));
    if (report.status != SessionReport::Status::Ok) {
        // Nothing of this unit ran (Refused), or we cannot know (connection lost): the DELETE
        // rolls back and the marker, if the EXEC did run, lets reconciliation finish the job.
        abort_worker_transaction();
        result.outcome = outcome_of(report.status);
        result.reconcile_needed = report.status != SessionReport::Status::Refused;
        set_batch_message(&result, report.message);
        return result;
    }

    int64 delivered = 0, rejected = 0, retry = 0;
    for (uint64 i = 0; i < count; i++) {
        if (results[i] == JobResult::Delivered)
            delivered++;
        else if (results[i] == JobResult::Rejected)
            rejected++;
        else
            retry++;
    }

    if (retry > 0) {
        // Redis took part of the unit and asks to retry the rest later. Make the marker name only
        // what it took, roll back, and let reconciliation delete exactly those jobs.
        auto* taken_ids = static_cast<int64*>(palloc(sizeof(int64) * count));
        size_t n_taken = 0;
        for (uint64 i = 0; i < count; i++)
            if (results[i] != JobResult::Retry)
                taken_ids[n_taken++] = jobs[i].id;
        SessionReport rewrite = jobbuf::redis::drain_session_write_marker(
            ctx->session, *ctx->waiter, reinterpret_cast<const std::int64_t*>(taken_ids), n_taken);
        abort_worker_transaction();
        result.outcome = rewrite.status == SessionReport::Status::Ok ? BatchOutcome::Refused
                                                                     : outcome_of(rewrite.status);
        result.reconcile_needed = true;
        set_batch_message(&result, "Redis refused part of a batch; the refused jobs stay staged");
        return result;
    }

    for (uint64 i = 0; i < count; i++)
        if (results[i] == JobResult::Rejected)
            dead_letter(taken, i, q->name, reject_message);
    record_batch(q->name, delivered, rejected, rejected > 0 ? reject_message : nullptr);
    int64 last_id = jobs[count - 1].id;
    commit_worker_transaction();
    publish_batch_counters(delivered);
    *after_id = last_id;
    if (rejected > 0) {
        ereport(WARNING, (errmsg("jobbuf: Redis rejected " INT64_FORMAT " job(s) of queue \"%s\"; moved to jobbuf.dead",
                                 rejected, q->name),
                          errdetail("%s", reject_message)));
    }
    result.outcome = count == static_cast<uint64>(limit) ? BatchOutcome::Full : BatchOutcome::Partial;
    return result;
}
