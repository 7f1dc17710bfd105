// Postgres regime: releasing expired claims of queues with delivery 'each' (see expired_claims.h).
#include "pg_includes.h"

#include "delivery/delivery_attempt.h"

#include "support/kept_plan.h"

#include "drain/expired_claims.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
}

namespace {

SPIPlanPtr bury_plan = nullptr;
SPIPlanPtr release_plan = nullptr;

void prepare_plans(void)
{
    {
        Oid types[1] = {TEXTOID};
        kept_plan(&bury_plan,
                  "SELECT jobbuf.bury_abandoned(q) FROM jobbuf.queues q WHERE q.name OPERATOR(pg_catalog.=) $1", 1,
                  types);
    }
    {
        Oid types[2] = {TEXTOID, INT4OID};
        kept_plan(&release_plan,
                  // Index jobs_leased (queue, lease_until) WHERE group_id IS NOT NULL: few rows, and
                  // none at all on a queue that nobody claimed. Jobs at max_attempts are left to the
                  // bury statement (a row it skipped as locked may be unlocked by now).
                  "WITH expired AS MATERIALIZED ("
                  "  SELECT j.id, j.unique_key FROM jobbuf.jobs j"
                  "  WHERE j.queue OPERATOR(pg_catalog.=) $1 AND j.group_id IS NOT NULL"
                  "    AND j.lease_until OPERATOR(pg_catalog.<=) pg_catalog.now()"
                  "    AND j.owner OPERATOR(pg_catalog.=) jobbuf.installation_id()"
                  "    AND j.attempts OPERATOR(pg_catalog.+) 1 OPERATOR(pg_catalog.<) coalesce(("
                  "        SELECT (q.options OPERATOR(pg_catalog.->>) 'max_attempts')::pg_catalog.int4"
                  "        FROM jobbuf.queues q WHERE q.name OPERATOR(pg_catalog.=) $1), 25)"
                  "  ORDER BY j.lease_until LIMIT $2 FOR UPDATE SKIP LOCKED"
                  // Released, a job re-enters jobs_unique_waiting: where a waiting job of this
                  // installation holds its key, or a newer job released here, it is dropped instead (as
                  // jobbuf_fail does); a held one gives way to it (the trigger jobs_yield_held_key).
                  "), superseded AS MATERIALIZED ("
                  "  SELECT e.id FROM expired e WHERE e.unique_key IS NOT NULL AND ("
                  "    EXISTS (SELECT 1 FROM jobbuf.jobs w WHERE w.queue OPERATOR(pg_catalog.=) $1"
                  "            AND w.unique_key OPERATOR(pg_catalog.=) e.unique_key AND w.group_id IS NULL"
                  "            AND w.owner OPERATOR(pg_catalog.=) jobbuf.installation_id())"
                  "    OR EXISTS (SELECT 1 FROM expired o WHERE o.unique_key OPERATOR(pg_catalog.=) e.unique_key"
                  "               AND o.id OPERATOR(pg_catalog.>) e.id))"
                  "), dropped AS ("
                  "  DELETE FROM jobbuf.jobs j USING superseded s WHERE j.id OPERATOR(pg_catalog.=) s.id"
                  "), released AS ("
                  "  UPDATE jobbuf.jobs j SET group_id = NULL, lease_until = NULL,"
                  "         attempts = j.attempts OPERATOR(pg_catalog.+) 1, last_error = 'lease expired'"
                  "  FROM expired e WHERE j.id OPERATOR(pg_catalog.=) e.id"
                  "    AND NOT EXISTS (SELECT 1 FROM superseded s WHERE s.id OPERATOR(pg_catalog.=) e.id)"
                  "  RETURNING j.id"
                  ")"
                  " SELECT pg_catalog.count(*), pg_catalog.min(r.id) FROM released r",
                  2, types);
    }
}

}  // namespace

bool release_expired_claims(const ActiveQueue* q, int limit, QueueProgress* progress, BatchResult* result)
{
    if (!begin_delivery_transaction("jobbuf: releasing expired claims", result))
        return false;
    prepare_plans();
    Datum values[2] = {CStringGetTextDatum(q->name), Int32GetDatum(limit)};
    execute_kept(bury_plan, values, nullptr, false, SPI_OK_SELECT, "burying expired claims");
    execute_kept(release_plan, values, nullptr, false, SPI_OK_SELECT, "releasing expired claims");
    if (SPI_processed != 1)
        elog(ERROR, "jobbuf: releasing expired claims returned " UINT64_FORMAT " rows", SPI_processed);
    bool isnull = false;
    int64 released = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    int64 lowest =
        released > 0 ? DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)) : 0;
    commit_worker_transaction();
    if (released > 0) {
        rewind_queue_progress(progress, lowest);
        ereport(LOG, (errmsg("jobbuf: released " INT64_FORMAT " job(s) of queue \"%s\" whose claim expired; "
                             "the worker delivers them",
                             released, q->name)));
    }
    return true;
}
