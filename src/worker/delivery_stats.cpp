// Postgres regime: per-queue and worker-wide delivery counters (see delivery_stats.h).
#include "pg_includes.h"

#include "kept_plan.h"

#include "shared_state.h"
#include "worker/delivery_stats.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
}

static SPIPlanPtr stats_plan = nullptr;

void record_batch(const char* queue, int64 delivered, int64 failed, const char* error)
{
    Datum values[4] = {CStringGetTextDatum(queue), Int64GetDatum(delivered), Int64GetDatum(failed),
                       error ? CStringGetTextDatum(error) : (Datum)0};
    char nulls[4] = {' ', ' ', ' ', static_cast<char>(error ? ' ' : 'n')};
    {
        Oid types[4] = {TEXTOID, INT8OID, INT8OID, TEXTOID};
        kept_plan(
            &stats_plan,
            "UPDATE jobbuf.queue_stats s SET"
            "  delivered_total = s.delivered_total OPERATOR(pg_catalog.+) $2,"
            "  failed_total = s.failed_total OPERATOR(pg_catalog.+) $3,"
            "  last_delivery_at = CASE WHEN $2 OPERATOR(pg_catalog.>) 0 THEN pg_catalog.now() ELSE s.last_delivery_at END,"
            "  last_error = coalesce($4, s.last_error),"
            "  last_error_at = CASE WHEN $4 IS NULL THEN s.last_error_at ELSE pg_catalog.now() END"
            " WHERE s.queue OPERATOR(pg_catalog.=) $1",
            4, types);
    }
    execute_kept(stats_plan, values, nulls, false, SPI_OK_UPDATE, "statistics update");
}

void publish_batch_counters(int64 delivered)
{
    if (jobbuf_shared == nullptr)
        return;
    pg_atomic_fetch_add_u64(&jobbuf_shared->batches, 1);
    pg_atomic_fetch_add_u64(&jobbuf_shared->delivered, delivered);
}
