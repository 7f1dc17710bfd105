// Postgres regime: marker reconciliation (see reconcile.h).
#include "pg_includes.h"

#include "support/kept_plan.h"

#include "delivery/delivery_counter.h"
#include "delivery/reconcile.h"
#include "drain/active_queues.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "utils/array.h"
}

using jobbuf::redis::SessionReport;

static SPIPlanPtr reconcile_plan = nullptr;

// Deletes the staged jobs that the markers just read name (Redis has them), in its own
// transaction, for the markers this start may act on (docs/copies.md): one it wrote itself; a
// 1.2 marker (read only by a start that holds the lease, which 1.2's rules gave it); one whose
// delivery number is one above this cluster's committed counter and whose jobs are staged here as
// they were pushed (a later start of the writer, after a crash cut the batch's commit off). Any
// other marker was written by another cluster (a copy, or the holder this one took the lease from
// with jobbuf_take_over()): the jobs it names are left alone. Acting on a marker raises the
// counter to its number in the same transaction. False when jobbuf's tables are locked (retried
// before the next batch).
static bool delete_marked_jobs(const jobbuf::redis::MarkerView* markers, size_t count, bool* gone)
{
    *gone = false;
    begin_worker_transaction("jobbuf: reconciling the last delivered batch");
    if (get_extension_oid("jobbuf", true) == InvalidOid) {
        abort_worker_transaction();
        *gone = true;  // nothing to reconcile; a new installation gets a new marker key
        return true;
    }
    if (!lock_jobbuf_tables()) {
        abort_worker_transaction();
        return false;
    }
    {
        Oid types[1] = {INT8ARRAYOID};
        kept_plan(&reconcile_plan,
                  "DELETE FROM jobbuf.jobs j"
                  " WHERE j.id OPERATOR(pg_catalog.=) ANY ($1) AND j.group_id IS NULL"
                  "   AND j.owner OPERATOR(pg_catalog.=) jobbuf.installation_id()",
                  1, types);
    }
    int64 committed = 0;
    bool take_over = false;
    read_delivery_counter(&committed, &take_over);
    uint64 deleted = 0;
    int64 raised = committed;
    int ignored = 0;
    for (size_t m = 0; m < count; m++) {
        const jobbuf::redis::MarkerView& marker = markers[m];
        bool act = marker.own || marker.legacy ||
                   (marker.number == committed + 1 && marker_names_staged_jobs(marker));
        if (!act) {
            // Another cluster's, or a batch this cluster committed (its jobs are gone already).
            ignored += marker.number > committed && marker.count > 0 ? 1 : 0;
            continue;
        }
        if (!marker.legacy)
            raised = Max(raised, marker.number);
        if (marker.count == 0)
            continue;
        auto* datums = static_cast<Datum*>(palloc(sizeof(Datum) * marker.count));
        for (size_t i = 0; i < marker.count; i++)
            datums[i] = Int64GetDatum(marker.ids[i]);
        ArrayType* array = construct_array(datums, static_cast<int>(marker.count), INT8OID, sizeof(int64),
                                           FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
        Datum args[1] = {PointerGetDatum(array)};
        execute_kept(reconcile_plan, args, nullptr, false, SPI_OK_DELETE, "reconciliation");
        deleted += SPI_processed;
    }
    if (raised > committed)
        raise_delivery_counter(raised, false);
    commit_worker_transaction();
    if (deleted > 0)
        ereport(
            LOG,
            (errmsg(
                "jobbuf: " UINT64_FORMAT
                " job(s) were already in Redis when the last batch was interrupted; removed them without pushing again",
                deleted)));
    if (ignored > 0)
        ereport(LOG, (errmsg("jobbuf: left alone the jobs named by %d delivery marker(s) that another start wrote "
                             "and this one does not continue (docs/copies.md)",
                             ignored)));
    return true;
}

// Reads the markers under the session's key and deletes the jobs they name; *done as for
// reconcile_delivered.
static SessionReport reconcile_marker(DrainContext* ctx, bool* done)
{
    *done = false;
    const jobbuf::redis::MarkerView* markers = nullptr;
    size_t count = 0;
    SessionReport report = jobbuf::redis::drain_session_read_marker(ctx->session, *ctx->waiter, &markers, &count);
    ctx->waiter->raise_pending();
    if (report.status != SessionReport::Status::Ok)
        return report;
    bool gone = false;
    *done = count == 0 || delete_marked_jobs(markers, count, &gone);
    return report;
}

// A batch that a 1.1 library left under the key 1.1 named its marker (cluster, database and
// extension oids), read once per worker after an update from 1.1: its jobs are deleted like any
// reconciled batch's, then the old key. The session points at the current key again afterwards.
static SessionReport reconcile_legacy_marker(DrainContext* ctx, bool* done)
{
    static bool legacy_reconciled = false;
    *done = true;
    if (legacy_reconciled || legacy_marker_key()[0] == '\0' || jobbuf::redis::drain_session_on_cluster(ctx->session))
        return {};
    jobbuf::redis::drain_session_set_marker_key(ctx->session, legacy_marker_key());
    SessionReport report = reconcile_marker(ctx, done);
    if (report.status == SessionReport::Status::Ok && *done) {
        report = jobbuf::redis::drain_session_delete_marker(ctx->session, *ctx->waiter);
        ctx->waiter->raise_pending();
        legacy_reconciled = report.status == SessionReport::Status::Ok;
        *done = legacy_reconciled;
    }
    jobbuf::redis::drain_session_set_marker_key(ctx->session, marker_key());
    return report;
}

SessionReport reconcile_delivered(DrainContext* ctx, bool* done)
{
    SessionReport report = reconcile_legacy_marker(ctx, done);
    if (report.status != SessionReport::Status::Ok || !*done)
        return report;
    return reconcile_marker(ctx, done);
}
