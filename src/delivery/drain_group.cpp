// Postgres regime: group delivery (see drain_group.h). The group's jobs stay in jobbuf.jobs,
// claimed, until the consumer completes or fails them; the message only names the group.
// Order: claim and commit, push, then count (or release the claim if the push failed), so that
// a consumer that pops the message at once always finds its group. A worker that dies between
// the claim and the push leaves a claimed group nobody was told of: its lease expires and it is
// claimed and pushed again (that expiry counts as an attempt).
#include "pg_includes.h"

#include "delivery/delivery_counter.h"
#include "delivery/delivery_attempt.h"

#include "support/kept_plan.h"

#include "census/queue_census.h"
#include "delivery/delivery_stats.h"
#include "delivery/depth_cap.h"
#include "delivery/drain_group.h"
#include "delivery/memory_room.h"
#include "delivery/rate_limit.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/uuid.h"
}

using jobbuf::redis::JobResult;
using jobbuf::redis::SessionReport;
using jobbuf::redis::StagedJob;

namespace {

// The size of a group when the queue sets no batch_size: jobbuf.claim's default (41_claim.sql).
constexpr int kGroupDefaultSize = 100;

SPIPlanPtr group_plan = nullptr;
SPIPlanPtr release_plan = nullptr;

// The worker claims groups through jobbuf.claim: schema jobbuf belongs to the extension's owner,
// while the extension's own schema (normally public) is the database owner's, who could add a
// function there that a call by name would pick. (The worker drains only databases with the SQL
// of its own version, see extension_version.h, so jobbuf.claim is there.) Every function and
// operator is schema-qualified (see worker_session.cpp).
void prepare_group_plan(void)
{
    Oid types[2] = {TEXTOID, INT4OID};
    const char* sql =
        "WITH claimed AS (SELECT * FROM jobbuf.claim(jobbuf.known_queue($1), $2, NULL::pg_catalog.text)),"
        " g AS (SELECT c.group_id, pg_catalog.array_agg(c.id ORDER BY c.id) AS ids,"
        "              pg_catalog.min(c.staged_at) AS staged_at FROM claimed c GROUP BY c.group_id)"
        // The message's identity (Sidekiq jid, stream field id) comes from the group id, so that
        // a group pushed again after its lease expired is a new message for deduplicating consumers.
        " SELECT ('x' OPERATOR(pg_catalog.||)"
        "         pg_catalog.substr(pg_catalog.replace(g.group_id::text, '-', ''), 1, 16))::bit(64)::bigint"
        "          OPERATOR(pg_catalog.&) 9223372036854775807,"
        "  g.ids, extract(epoch FROM g.staged_at)::float8, g.group_id"
        " FROM g";
    kept_plan(&group_plan, sql, 2, types);
}

// The message's payload, as the queue's target writes it for this group and its job ids (an
// int8[]), in cxt; *count is the number of jobs.
char* group_payload(const ActiveQueue* q, const char* group_id, Datum ids, MemoryContext cxt, int64* count)
{
    Datum* items;
    int n = 0;
    deconstruct_array(DatumGetArrayTypeP(ids), INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &items,
                      nullptr, &n);
    auto* job_ids = static_cast<int64*>(palloc(sizeof(int64) * (n + 1)));
    for (int i = 0; i < n; i++)
        job_ids[i] = DatumGetInt64(items[i]);
    *count = n;
    const auto* id_array = reinterpret_cast<const std::int64_t*>(job_ids);
    char probe[1];
    size_t len = jobbuf::redis::queue_target_group_payload(q->target, group_id, id_array, n, probe, sizeof(probe));
    if (len == 0)
        ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("jobbuf: out of memory building a group message")));
    char* payload = static_cast<char*>(MemoryContextAlloc(cxt, len + 1));
    jobbuf::redis::queue_target_group_payload(q->target, group_id, id_array, n, payload, len + 1);
    return payload;
}

}  // namespace

BatchResult drain_one_group(DrainContext* ctx, const ActiveQueue* q, QueueProgress* progress)
{
    BatchResult result{};
    // A group message is small: the memory guard only holds it while the node is at its limit.
    jobbuf::redis::MemoryRoom room;
    if (!memory_room_for(ctx, q, &room, &result))
        return result;
    // max_rate counts the group's jobs: a group waits until the token bucket holds it (0: the
    // claim's default size).
    int limit = q->batch_size;
    bool limited = jobbuf::redis::queue_target_max_in_redis(q->target) > 0;
    int bounded = limit > 0 ? limit : kGroupDefaultSize;
    if (!rate_room_for_group(q, &bounded, &result))
        return result;
    limited = limited || bounded < (limit > 0 ? limit : kGroupDefaultSize);
    // 1. Claim and commit, so that the consumer that pops the message sees the group.
    if (!begin_delivery_transaction("jobbuf: claiming a group", &result))
        return result;
    // max_in_redis counts the jobs of groups pushed and not yet completed or failed.
    if (!group_depth_room_for(q, progress, &bounded, &result)) {
        commit_worker_transaction();
        return result;
    }
    if (limited)
        limit = bounded;
    prepare_group_plan();
    Datum args[2] = {CStringGetTextDatum(q->name), Int32GetDatum(limit)};
    char nulls[2] = {' ', static_cast<char>(limit > 0 ? ' ' : 'n')};
    execute_kept(group_plan, args, nulls, false, SPI_OK_SELECT, "claiming a group");
    if (!queue_list_still_current(&result))
        return result;
    if (SPI_processed == 0) {
        commit_worker_transaction();
        result.outcome = BatchOutcome::Empty;
        return result;
    }
    HeapTuple tuple = SPI_tuptable->vals[0];
    TupleDesc desc = SPI_tuptable->tupdesc;
    bool isnull = false;
    // Copied out of SPI's memory, which the commit frees.
    MemoryContext message_cxt = TopMemoryContext;
    Datum group_id = SPI_getbinval(tuple, desc, 4, &isnull);
    char* group_text = MemoryContextStrdup(message_cxt, DatumGetCString(DirectFunctionCall1(uuid_out, group_id)));
    int64 jobs_in_group = 0;
    char* body = group_payload(q, group_text, SPI_getbinval(tuple, desc, 2, &isnull), message_cxt, &jobs_in_group);
    StagedJob message;
    message.id = DatumGetInt64(SPI_getbinval(tuple, desc, 1, &isnull));
    message.payload = std::string_view(body);
    message.staged_at = DatumGetFloat8(SPI_getbinval(tuple, desc, 3, &isnull));
    message.marked = false;  // its jobs stay in jobbuf.jobs: reconciliation must never touch them
    message.id_salt = installation_salt();
    commit_worker_transaction();

    // 2. Push one message for the group.
    double now = now_epoch_seconds();
    message.run_at = now;
    JobResult outcome = JobResult::Retry;
    char reject_message[jobbuf::redis::kMessageLen];
    SessionReport report = jobbuf::redis::drain_session_deliver(ctx->session, *ctx->waiter, q->target, &message, 1, now,
                                                                &outcome, reject_message, sizeof(reject_message));
    ctx->waiter->raise_pending();
    bool pushed = report.status == SessionReport::Status::Ok && outcome == JobResult::Delivered;

    // 3. Count it, or release the claim (not an attempt: no consumer saw it). If the push did
    //    reach Redis after all (a reply lost to a timeout), its message names a group that no
    //    longer holds jobs, which jobbuf_group reads as empty.
    begin_worker_transaction(pushed ? "jobbuf: counting a group" : "jobbuf: releasing a group");
    if (pushed) {
        record_batch(q->name, jobs_in_group, 0, nullptr);
        record_delivery_number(jobbuf::redis::drain_session_unit_number(ctx->session));
    } else {
        Oid types[1] = {UUIDOID};
        kept_plan(&release_plan,
                  "UPDATE jobbuf.jobs j SET group_id = NULL, lease_until = NULL"
                  " WHERE j.group_id OPERATOR(pg_catalog.=) $1",
                  1, types);
        Datum release_args[1] = {DirectFunctionCall1(uuid_in, CStringGetDatum(group_text))};
        execute_kept(release_plan, release_args, nullptr, false, SPI_OK_UPDATE, "releasing a group");
        // The unit ran (Redis rejected the message, or replicas did not acknowledge it): its marker
        // is in Redis with its number, which the counter must reach (delivery_counter.h).
        if (jobbuf::redis::drain_session_unit_ran(ctx->session))
            record_delivery_number(jobbuf::redis::drain_session_unit_number(ctx->session));
    }
    commit_worker_transaction();
    pfree(group_text);
    pfree(body);

    if (!pushed) {
        bool whole_unit = report.status != SessionReport::Status::Ok;
        result.outcome = whole_unit ? outcome_of(report.status) : BatchOutcome::Refused;
        set_batch_message(&result, whole_unit ? report.message : reject_message);
        return result;
    }
    jobbuf::redis::drain_session_memory_spent(ctx->session, q->target, message.payload.size(), 1);
    rate_spent(q, jobs_in_group);
    publish_batch_counters(jobs_in_group);
    note_delivered_count(q->name, jobs_in_group, now_epoch_seconds());
    result.outcome = BatchOutcome::Full;
    return result;
}
