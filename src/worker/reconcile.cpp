// Postgres regime: marker reconciliation (see reconcile.h).
#include "pg_includes.h"

#include "kept_plan.h"

#include "worker/reconcile.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "utils/array.h"
}

using jobbuf::redis::SessionReport;

static SPIPlanPtr reconcile_plan = nullptr;

SessionReport reconcile_delivered(DrainContext* ctx, bool* done)
{
    *done = false;
    const std::int64_t* ids = nullptr;
    size_t count = 0;
    SessionReport report = jobbuf::redis::drain_session_read_marker(ctx->session, *ctx->waiter, &ids, &count);
    ctx->waiter->raise_pending();
    if (report.status != SessionReport::Status::Ok)
        return report;
    if (count == 0) {
        *done = true;
        return report;
    }

    begin_worker_transaction("jobbuf: reconciling the last delivered batch");
    if (get_extension_oid("jobbuf", true) == InvalidOid) {
        abort_worker_transaction();
        *done = true;  // nothing to reconcile; a new installation gets a new marker key
        return report;
    }
    if (!lock_jobbuf_tables()) {
        abort_worker_transaction();
        return report;  // not done: retried before the next batch
    }
    {
        Oid types[1] = {INT8ARRAYOID};
        kept_plan(&reconcile_plan, "DELETE FROM jobbuf.jobs j"
                                      " WHERE j.id OPERATOR(pg_catalog.=) ANY ($1) AND j.group_id IS NULL",
                                      1, types);
    }
    auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * count));
    for (size_t i = 0; i < count; i++)
        datums[i] = Int64GetDatum(ids[i]);
    ArrayType* array = construct_array(datums, static_cast<int>(count), INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
    Datum args[1] = {PointerGetDatum(array)};
    execute_kept(reconcile_plan, args, nullptr, false, SPI_OK_DELETE, "reconciliation");
    uint64 deleted = SPI_processed;
    commit_worker_transaction();
    *done = true;
    if (deleted > 0)
        ereport(LOG, (errmsg("jobbuf: " UINT64_FORMAT " job(s) were already in Redis when the last batch was interrupted; removed them without pushing again",
                             deleted)));
    return report;
}
