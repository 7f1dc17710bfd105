// Postgres regime: per-queue and worker-wide delivery counters (see delivery_stats.h).
#include "pg_includes.h"

#include "support/kept_plan.h"

#include "config/shared_state.h"
#include "delivery/delivery_stats.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

namespace {

SPIPlanPtr by_row_plan = nullptr;
SPIPlanPtr by_queue_plan = nullptr;

// Where each queue's counters row was last written. While an old snapshot holds the xmin
// horizon, every batch's UPDATE leaves a row version nobody can remove, and an UPDATE that
// finds its row by key walks every one of them (through the primary key's entries and the
// versions' chains): 1 ms a batch after 15,000 batches. The version this worker wrote last is
// the live one unless the row was written since (the census, a rotation, a queue dropped and
// made again) or that write rolled back: the address then holds an invisible version, another
// queue's row (hence "AND queue = $1") or nothing, the UPDATE by address changes no row, and the
// one by key runs.
struct CountersRow {
    char queue[NAMEDATALEN];  // hash key
    ItemPointerData ctid;
};
HTAB* counters_rows = nullptr;

// The SET list and its parameters ($1 queue, $2 delivered, $3 failed, $4 error), shared by both
// statements.
#define COUNTERS_SET                                                                                                   \
    "UPDATE jobbuf.queue_stats s SET"                                                                                  \
    "  delivered_total = s.delivered_total OPERATOR(pg_catalog.+) $2,"                                                 \
    "  failed_total = s.failed_total OPERATOR(pg_catalog.+) $3,"                                                       \
    "  last_delivery_at = CASE WHEN $2 OPERATOR(pg_catalog.>) 0 THEN pg_catalog.now() ELSE s.last_delivery_at END,"    \
    "  last_error = coalesce($4, s.last_error),"                                                                       \
    "  last_error_at = CASE WHEN $4 IS NULL THEN s.last_error_at ELSE pg_catalog.now() END"

void prepare_plans(void)
{
    Oid types[5] = {TEXTOID, INT8OID, INT8OID, TEXTOID, TIDOID};
    kept_plan(&by_row_plan,
              COUNTERS_SET " WHERE s.ctid OPERATOR(pg_catalog.=) $5 AND s.queue OPERATOR(pg_catalog.=) $1"
                           " RETURNING s.ctid",
              5, types);
    kept_plan(&by_queue_plan, COUNTERS_SET " WHERE s.queue OPERATOR(pg_catalog.=) $1 RETURNING s.ctid", 4, types);
}

CountersRow* counters_row(const char* queue)
{
    if (counters_rows == nullptr) {
        HASHCTL ctl;
        memset(&ctl, 0, sizeof(ctl));
        ctl.keysize = NAMEDATALEN;
        ctl.entrysize = sizeof(CountersRow);
        ctl.hcxt = TopMemoryContext;
        counters_rows = hash_create("jobbuf counters rows", 64, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
    }
    char key[NAMEDATALEN] = {0};
    strlcpy(key, queue, NAMEDATALEN);
    bool found = false;
    auto* row = static_cast<CountersRow*>(hash_search(counters_rows, key, HASH_ENTER, &found));
    if (!found)
        ItemPointerSetInvalid(&row->ctid);
    return row;
}

}  // namespace

void record_batch(const char* queue, int64 delivered, int64 failed, const char* error)
{
    prepare_plans();
    CountersRow* row = counters_row(queue);
    Datum values[5] = {CStringGetTextDatum(queue), Int64GetDatum(delivered), Int64GetDatum(failed),
                       error ? CStringGetTextDatum(error) : (Datum)0, PointerGetDatum(&row->ctid)};
    char nulls[5] = {' ', ' ', ' ', static_cast<char>(error ? ' ' : 'n'), ' '};
    if (ItemPointerIsValid(&row->ctid))
        execute_kept(by_row_plan, values, nulls, false, SPI_OK_UPDATE_RETURNING, "statistics update");
    if (!ItemPointerIsValid(&row->ctid) || SPI_processed == 0)
        execute_kept(by_queue_plan, values, nulls, false, SPI_OK_UPDATE_RETURNING, "statistics update");
    if (SPI_processed == 1) {
        bool isnull = false;
        Datum ctid = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
        row->ctid = *reinterpret_cast<ItemPointer>(DatumGetPointer(ctid));
    } else {
        ItemPointerSetInvalid(&row->ctid);  // the queue has no counters row (being dropped)
    }
}

void publish_batch_counters(int64 delivered)
{
    if (my_drain_slot == nullptr)
        return;
    pg_atomic_fetch_add_u64(&my_drain_slot->batches, 1);
    pg_atomic_fetch_add_u64(&my_drain_slot->delivered, delivered);
}
