// Postgres regime: group delivery (see drain_group.h). The group's jobs stay in jobbuf.jobs,
// claimed, until the consumer completes or fails them; the message only names the group.
#include "pg_includes.h"

#include "delivery_stats.h"
#include "drain_group.h"
#include "worker_transaction.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
}

using jobbuf::redis::JobResult;
using jobbuf::redis::SessionReport;
using jobbuf::redis::StagedJob;

namespace {

SPIPlanPtr group_plan = nullptr;
char group_plan_schema[NAMEDATALEN * 2 + 3];  // the quoted extension schema group_plan was built for

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

}  // namespace

BatchResult drain_one_group(DrainContext* ctx, const ActiveQueue* q)
{
    BatchResult result{};
    bool sidekiq = q->spec.kind == static_cast<int>(jobbuf::redis::QueueTarget::Kind::Sidekiq);

    begin_worker_transaction("jobbuf: delivering a group");
    prepare_group_plan(extension_schema());
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
        set_batch_message(&result, whole_unit ? report.message : reject_message);
        return result;
    }
    record_batch(q->name, jobs_in_group, 0, nullptr);
    commit_worker_transaction();
    publish_batch_counters(jobs_in_group);
    result.outcome = BatchOutcome::Full;
    return result;
}
