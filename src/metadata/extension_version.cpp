// Postgres regime: the installed version of the extension's SQL (see extension_version.h).
#include "pg_includes.h"

#include "metadata/extension_version.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "utils/builtins.h"
#include "storage/lmgr.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

// A transaction's catalog rows are visible to new snapshots (ProcArrayEndTransaction) before it
// sends its invalidation messages, and the commit callbacks that wake the worker run in between
// (CommitTransaction: ProcArrayEndTransaction, XACT_EVENT_COMMIT, AtEOXact_Inval, then the locks
// are released). A worker woken by CREATE EXTENSION (or ALTER EXTENSION UPDATE) could see the
// pg_extension row while its caches still held what the extension's objects replaced: the
// negative entry its own lookups left for the schema "jobbuf" while the extension was missing, so
// that its first statement failed with 'relation "jobbuf.queues" does not exist'. Waiting for
// the lock that transaction holds on its own xid (released after its invalidations were sent),
// then reading them, ends that window; a row written long ago costs one uncontended lock.
// The row is read with the caller's active snapshot when it has one (the worker's statements run
// with it): the catalog snapshot can be newer, and a worker whose transaction began just before
// the CREATE EXTENSION committed then found the extension while its statements could not see
// the rows the script inserted ("jobbuf.installation must hold exactly one row").
static void await_published(TransactionId xmin)
{
    if (!TransactionIdIsNormal(xmin) || TransactionIdIsCurrentTransactionId(xmin))
        return;
    XactLockTableWait(xmin, nullptr, nullptr, XLTW_None);
    AcceptInvalidationMessages();
}

InstalledJobbuf installed_jobbuf(void)
{
    InstalledJobbuf found{InstalledExtension::Missing, InvalidOid, ""};
    Relation catalog = table_open(ExtensionRelationId, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ, CStringGetDatum("jobbuf"));
    Snapshot snapshot = ActiveSnapshotSet() ? GetActiveSnapshot() : nullptr;  // nullptr: the catalog snapshot
    SysScanDesc scan = systable_beginscan(catalog, ExtensionNameIndexId, true, snapshot, 1, &key);
    HeapTuple tuple = systable_getnext(scan);
    TransactionId xmin = InvalidTransactionId;
    if (HeapTupleIsValid(tuple)) {
        xmin = HeapTupleHeaderGetXmin(tuple->t_data);
        auto* row = reinterpret_cast<Form_pg_extension>(GETSTRUCT(tuple));
        bool isnull = false;
        Datum version = heap_getattr(tuple, Anum_pg_extension_extversion, RelationGetDescr(catalog), &isnull);
        found.extension_oid = row->oid;
        if (!isnull)
            text_to_cstring_buffer(DatumGetTextPP(version), found.version, sizeof(found.version));
        found.state =
            strcmp(found.version, kJobbufSqlVersion) == 0 ? InstalledExtension::Current : InstalledExtension::Outdated;
    }
    systable_endscan(scan);
    table_close(catalog, AccessShareLock);
    await_published(xmin);
    return found;
}

// jobbuf.library_version(): the SQL version the loaded library implements. Exported only by 1.1
// and later libraries, so the update script, which creates it, fails while an older library is
// loaded (ALTER EXTENSION jobbuf UPDATE before the restart that loads the new build).
extern "C" {
PG_FUNCTION_INFO_V1(jobbuf_library_version);
PGDLLEXPORT Datum jobbuf_library_version(PG_FUNCTION_ARGS)
{
    PG_RETURN_TEXT_P(cstring_to_text(kJobbufSqlVersion));
}
}
