// Postgres regime: one drain batch and the marker reconciliation (see drain_batch.h).
//
// A batch is one Postgres transaction around one Redis unit:
//   1. DELETE the oldest ready jobs of a queue (FOR UPDATE SKIP LOCKED) RETURNING them;
//   2. push them with MULTI ... SET <marker> <their ids> EXEC;
//   3. dead-letter the jobs Redis rejected, count the rest, COMMIT.
// If Redis fails, the transaction aborts and the jobs stay staged. If Postgres fails after the
// EXEC, the marker names the batch and reconcile_delivered deletes those jobs instead of pushing
// them again: the job reaches Redis once.
#include "pg_includes.h"

#include <new>

#include "drain_batch.h"
#include "shared_state.h"
#include "settings.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

using jobbuf::redis::JobResult;
using jobbuf::redis::SessionReport;
using jobbuf::redis::StagedJob;

namespace {

SPIPlanPtr take_plan = nullptr;
SPIPlanPtr dead_plan = nullptr;
SPIPlanPtr stats_plan = nullptr;
SPIPlanPtr reconcile_plan = nullptr;
SPIPlanPtr queues_plan = nullptr;
SPIPlanPtr group_plan = nullptr;
char group_plan_schema[NAMEDATALEN * 2 + 3];  // the quoted extension schema group_plan was built for
char extension_schema[NAMEDATALEN * 2 + 3];   // the quoted extension schema, from the queue list

char marker_key_buffer[128];
uint32 jid_salt_value = 0;

SPIPlanPtr prepare_kept(const char* sql, int nargs, Oid* types)
{
    SPIPlanPtr plan = SPI_prepare(sql, nargs, types);
    if (plan == nullptr)
        elog(ERROR, "jobbuf: could not prepare a worker statement: %s", SPI_result_code_string(SPI_result));
    SPI_keepplan(plan);
    return plan;
}

void prepare_batch_plans(void)
{
    if (take_plan == nullptr) {
        Oid types[3] = {TEXTOID, INT4OID, BOOLOID};
        take_plan = prepare_kept(
            "WITH picked AS ("
            "  SELECT id FROM jobbuf.jobs"
            "  WHERE queue = $1 AND group_id IS NULL AND ($3 OR run_at <= now())"
            "  ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED"
            "), taken AS ("
            "  DELETE FROM jobbuf.jobs j USING picked WHERE j.id = picked.id RETURNING j.*"
            ") SELECT id,"
            "  CASE WHEN $3 THEN (payload - 'queue' - 'jid' - 'created_at' - 'enqueued_at')::text"
            "       ELSE payload::text END,"
            "  extract(epoch FROM staged_at)::float8, extract(epoch FROM run_at)::float8,"
            "  $3 AND payload ? 'retry',"
            "  payload, partition_key, unique_key, staged_at, attempts"
            " FROM taken ORDER BY id",
            3, types);
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
    if (stats_plan == nullptr) {
        Oid types[4] = {TEXTOID, INT8OID, INT8OID, TEXTOID};
        stats_plan = prepare_kept(
            "UPDATE jobbuf.queue_stats SET"
            "  delivered_total = delivered_total + $2,"
            "  failed_total = failed_total + $3,"
            "  last_delivery_at = CASE WHEN $2 > 0 THEN now() ELSE last_delivery_at END,"
            "  last_error = coalesce($4, last_error),"
            "  last_error_at = CASE WHEN $4 IS NULL THEN last_error_at ELSE now() END"
            " WHERE queue = $1",
            4, types);
    }
}

// jobbuf_claim lives in the extension's schema, which the worker learns with the queue list.
void prepare_group_plan(const char* quoted_schema)
{
    if (group_plan != nullptr && strcmp(group_plan_schema, quoted_schema) == 0)
        return;
    if (group_plan != nullptr) {
        SPI_freeplan(group_plan);
        group_plan = nullptr;
    }
    Oid types[4] = {TEXTOID, INT4OID, BOOLOID, TEXTOID};
    char* sql = psprintf(
        "WITH claimed AS (SELECT * FROM %s.jobbuf_claim($1, $2)),"
        " g AS (SELECT c.group_id, min(c.id) AS first_id, array_agg(c.id ORDER BY c.id) AS ids,"
        "              min(c.staged_at) AS staged_at FROM claimed c GROUP BY c.group_id)"
        " SELECT first_id,"
        "  CASE WHEN $3 THEN jsonb_build_object('class', $4, 'args', jsonb_build_array(group_id))"
        "       ELSE jsonb_build_object('group_id', group_id, 'ids', to_jsonb(ids)) END::text,"
        "  extract(epoch FROM staged_at)::float8, cardinality(ids)"
        " FROM g",
        quoted_schema);
    group_plan = prepare_kept(sql, 4, types);
    strlcpy(group_plan_schema, quoted_schema, sizeof(group_plan_schema));
}

void begin_worker_transaction(const char* activity)
{
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    if (SPI_connect() != SPI_OK_CONNECT)
        elog(ERROR, "jobbuf: SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    pgstat_report_activity(STATE_RUNNING, activity);
}

void commit_worker_transaction(void)
{
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    pgstat_report_stat(false);  // lets autovacuum see the worker's deletes
    pgstat_report_activity(STATE_IDLE, nullptr);
}

void abort_worker_transaction(void)
{
    SPI_finish();
    PopActiveSnapshot();
    AbortCurrentTransaction();
    pgstat_report_activity(STATE_IDLE, nullptr);
}

double now_epoch_seconds(void)
{
    TimestampTz now = GetCurrentTimestamp();
    return static_cast<double>(now) / USECS_PER_SEC +
           static_cast<double>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY;
}

void copy_message(BatchResult* result, const char* text)
{
    strlcpy(result->message, text, sizeof(result->message));
}

BatchOutcome outcome_of(SessionReport::Status status)
{
    switch (status) {
    case SessionReport::Status::Interrupted:
        return BatchOutcome::Interrupted;
    case SessionReport::Status::Refused:
        return BatchOutcome::Refused;
    default:
        return BatchOutcome::Unavailable;
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

void count_batch(const char* queue, int64 delivered, int64 failed, const char* error)
{
    Datum values[4] = {CStringGetTextDatum(queue), Int64GetDatum(delivered), Int64GetDatum(failed),
                       error ? CStringGetTextDatum(error) : (Datum) 0};
    char nulls[4] = {' ', ' ', ' ', static_cast<char>(error ? ' ' : 'n')};
    int rc = SPI_execute_plan(stats_plan, values, nulls, false, 0);
    if (rc != SPI_OK_UPDATE)
        elog(ERROR, "jobbuf: statistics update failed: %s", SPI_result_code_string(rc));
}

}  // namespace

void delivery_identity(char* marker_key, size_t len, uint32* jid_salt)
{
    if (marker_key_buffer[0] == '\0') {
        uint64 sysid = GetSystemIdentifier();
        snprintf(marker_key_buffer, sizeof(marker_key_buffer), "jobbuf:marker:" UINT64_FORMAT ":%u",
                 sysid, MyDatabaseId);
        uint64 seed[2] = {sysid, MyDatabaseId};
        jid_salt_value = hash_bytes(reinterpret_cast<const unsigned char*>(seed), sizeof(seed));
    }
    strlcpy(marker_key, marker_key_buffer, len);
    *jid_salt = jid_salt_value;
}

BatchResult drain_one_batch(DrainContext* ctx, const ActiveQueue* q)
{
    BatchResult result{};
    int limit = q->batch_size > 0 ? q->batch_size : jobbuf_batch_size;
    bool sidekiq = q->spec.kind == static_cast<int>(jobbuf::redis::QueueTarget::Kind::Sidekiq);

    begin_worker_transaction("jobbuf: delivering a batch");
    prepare_batch_plans();

    Datum args[3] = {CStringGetTextDatum(q->name), Int32GetDatum(limit), BoolGetDatum(sidekiq)};
    int rc = SPI_execute_plan(take_plan, args, nullptr, false, 0);
    if (rc != SPI_OK_SELECT)
        elog(ERROR, "jobbuf: taking a batch failed: %s", SPI_result_code_string(rc));
    uint64 count = SPI_processed;
    SPITupleTable* taken = SPI_tuptable;
    if (count == 0) {
        commit_worker_transaction();
        result.outcome = BatchOutcome::Empty;
        return result;
    }

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
        copy_message(&result, report.message);
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
        copy_message(&result, "Redis refused part of a batch; the refused jobs stay staged");
        return result;
    }

    for (uint64 i = 0; i < count; i++)
        if (results[i] == JobResult::Rejected)
            dead_letter(taken, i, q->name, reject_message);
    count_batch(q->name, delivered, rejected, rejected > 0 ? reject_message : nullptr);
    commit_worker_transaction();

    if (jobbuf_shared) {
        pg_atomic_fetch_add_u64(&jobbuf_shared->batches, 1);
        pg_atomic_fetch_add_u64(&jobbuf_shared->delivered, delivered);
    }
    if (rejected > 0) {
        ereport(WARNING, (errmsg("jobbuf: Redis rejected " INT64_FORMAT " job(s) of queue \"%s\"; moved to jobbuf.dead",
                                 rejected, q->name),
                          errdetail("%s", reject_message)));
    }
    result.outcome = count == static_cast<uint64>(limit) ? BatchOutcome::Full : BatchOutcome::Partial;
    return result;
}

BatchResult drain_one_group(DrainContext* ctx, const ActiveQueue* q)
{
    BatchResult result{};
    bool sidekiq = q->spec.kind == static_cast<int>(jobbuf::redis::QueueTarget::Kind::Sidekiq);

    begin_worker_transaction("jobbuf: delivering a group");
    prepare_batch_plans();
    prepare_group_plan(extension_schema);
    Datum args[4] = {CStringGetTextDatum(q->name), Int32GetDatum(q->batch_size), BoolGetDatum(sidekiq),
                     CStringGetTextDatum(q->group_class)};
    char nulls[4] = {' ', static_cast<char>(q->batch_size > 0 ? ' ' : 'n'), ' ', ' '};
    int rc = SPI_execute_plan(group_plan, args, nulls, false, 0);
    if (rc != SPI_OK_SELECT)
        elog(ERROR, "jobbuf: claiming a group failed: %s", SPI_result_code_string(rc));
    if (SPI_processed == 0) {
        commit_worker_transaction();
        result.outcome = BatchOutcome::Empty;
        return result;
    }

    // One message for the group. It is not named by the marker: its jobs stay in Postgres, claimed,
    // until the consumer completes them. If this transaction fails after the push, the claim rolls
    // back and the message names a group that does not exist: jobbuf_group returns nothing for it.
    HeapTuple tuple = SPI_tuptable->vals[0];
    TupleDesc desc = SPI_tuptable->tupdesc;
    bool isnull = false;
    StagedJob message;
    message.id = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
    text* body = DatumGetTextPP(SPI_getbinval(tuple, desc, 2, &isnull));
    message.payload = std::string_view(VARDATA_ANY(body), VARSIZE_ANY_EXHDR(body));
    message.staged_at = DatumGetFloat8(SPI_getbinval(tuple, desc, 3, &isnull));
    double now = now_epoch_seconds();
    message.run_at = now;
    message.marked = false;
    int64 jobs_in_group = DatumGetInt32(SPI_getbinval(tuple, desc, 4, &isnull));

    JobResult outcome = JobResult::Retry;
    char reject_message[jobbuf::redis::kMessageLen];
    SessionReport report = jobbuf::redis::drain_session_deliver(
        ctx->session, *ctx->waiter, q->spec, &message, 1, now, &outcome, reject_message, sizeof(reject_message));
    if (report.status != SessionReport::Status::Ok || outcome != JobResult::Delivered) {
        abort_worker_transaction();
        bool whole_unit = report.status != SessionReport::Status::Ok;
        result.outcome = whole_unit ? outcome_of(report.status) : BatchOutcome::Refused;
        copy_message(&result, whole_unit ? report.message : reject_message);
        return result;
    }
    count_batch(q->name, jobs_in_group, 0, nullptr);
    commit_worker_transaction();
    if (jobbuf_shared) {
        pg_atomic_fetch_add_u64(&jobbuf_shared->batches, 1);
        pg_atomic_fetch_add_u64(&jobbuf_shared->delivered, jobs_in_group);
    }
    result.outcome = BatchOutcome::Full;
    return result;
}

SessionReport reconcile_delivered(DrainContext* ctx)
{
    const std::int64_t* ids = nullptr;
    size_t count = 0;
    SessionReport report = jobbuf::redis::drain_session_read_marker(ctx->session, *ctx->waiter, &ids, &count);
    if (report.status != SessionReport::Status::Ok || count == 0)
        return report;

    begin_worker_transaction("jobbuf: reconciling the last delivered batch");
    if (get_extension_oid("jobbuf", true) == InvalidOid) {
        abort_worker_transaction();
        return report;
    }
    if (reconcile_plan == nullptr) {
        Oid types[1] = {INT8ARRAYOID};
        reconcile_plan = prepare_kept("DELETE FROM jobbuf.jobs WHERE id = ANY ($1) AND group_id IS NULL", 1, types);
    }
    auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * count));
    for (size_t i = 0; i < count; i++)
        datums[i] = Int64GetDatum(ids[i]);
    ArrayType* array = construct_array(datums, static_cast<int>(count), INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
    Datum args[1] = {PointerGetDatum(array)};
    int rc = SPI_execute_plan(reconcile_plan, args, nullptr, false, 0);
    if (rc != SPI_OK_DELETE)
        elog(ERROR, "jobbuf: reconciliation failed: %s", SPI_result_code_string(rc));
    uint64 deleted = SPI_processed;
    commit_worker_transaction();
    if (deleted > 0)
        ereport(LOG, (errmsg("jobbuf: " UINT64_FORMAT " job(s) were already in Redis when the last batch was interrupted; removed them without pushing again",
                             deleted)));
    return report;
}

int load_active_queues(MemoryContext cxt, ActiveQueue** queues)
{
    begin_worker_transaction("jobbuf: loading queues");
    if (get_extension_oid("jobbuf", true) == InvalidOid) {
        commit_worker_transaction();
        return -1;
    }
    if (queues_plan == nullptr)
        queues_plan = prepare_kept(
            "SELECT name, CASE target WHEN 'list' THEN 0 WHEN 'stream' THEN 1 ELSE 2 END,"
            "  coalesce(options->>'key', 'jobbuf:' || name),"
            "  coalesce((options->>'maxlen')::bigint, 0),"
            "  coalesce(options->>'sidekiq_queue', name),"
            "  coalesce((options->>'namespace') || ':', ''),"
            "  coalesce((options->>'sidekiq_version')::int, 7),"
            "  coalesce((options->>'batch_size')::int, 0),"
            "  options->>'delivery' = 'group',"
            "  coalesce(options->>'group_class', ''),"
            "  (SELECT quote_ident(n.nspname) FROM pg_catalog.pg_extension e"
            "     JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'jobbuf')"
            " FROM jobbuf.queues"
            " WHERE NOT paused AND target IN ('list', 'stream', 'sidekiq')"
            " ORDER BY name",
            0, nullptr);
    int rc = SPI_execute_plan(queues_plan, nullptr, nullptr, true, 0);
    if (rc != SPI_OK_SELECT)
        elog(ERROR, "jobbuf: loading queues failed: %s", SPI_result_code_string(rc));

    int count = static_cast<int>(SPI_processed);
    uint32 salt = 0;
    char unused[128];
    delivery_identity(unused, sizeof(unused), &salt);
    auto* list = static_cast<ActiveQueue*>(MemoryContextAllocZero(cxt, sizeof(ActiveQueue) * (count + 1)));
    for (int i = 0; i < count; i++) {
        HeapTuple tuple = SPI_tuptable->vals[i];
        TupleDesc desc = SPI_tuptable->tupdesc;
        bool isnull = false;
        ActiveQueue* q = &list[i];
        strlcpy(q->name, TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull)), NAMEDATALEN);
        q->spec.kind = DatumGetInt32(SPI_getbinval(tuple, desc, 2, &isnull));
        q->spec.key = MemoryContextStrdup(cxt, TextDatumGetCString(SPI_getbinval(tuple, desc, 3, &isnull)));
        q->spec.maxlen = DatumGetInt64(SPI_getbinval(tuple, desc, 4, &isnull));
        q->spec.sidekiq_queue = MemoryContextStrdup(cxt, TextDatumGetCString(SPI_getbinval(tuple, desc, 5, &isnull)));
        q->spec.namespace_prefix = MemoryContextStrdup(cxt, TextDatumGetCString(SPI_getbinval(tuple, desc, 6, &isnull)));
        q->spec.sidekiq_version = DatumGetInt32(SPI_getbinval(tuple, desc, 7, &isnull));
        q->spec.jid_salt = salt;
        q->batch_size = DatumGetInt32(SPI_getbinval(tuple, desc, 8, &isnull));
        Datum group = SPI_getbinval(tuple, desc, 9, &isnull);
        q->group_delivery = !isnull && DatumGetBool(group);
        q->group_class = MemoryContextStrdup(cxt, TextDatumGetCString(SPI_getbinval(tuple, desc, 10, &isnull)));
        Datum schema = SPI_getbinval(tuple, desc, 11, &isnull);
        if (!isnull)
            strlcpy(extension_schema, TextDatumGetCString(schema), sizeof(extension_schema));
    }
    commit_worker_transaction();
    *queues = list;
    return count;
}
