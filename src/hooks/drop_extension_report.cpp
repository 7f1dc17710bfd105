// Postgres regime: what DROP EXTENSION jobbuf throws away (see drop_extension_report.h).
#include "pg_includes.h"

#include "hooks/drop_extension_report.h"
#include "metadata/extension_version.h"
#include "pg_compat.h"

extern "C" {
#include "catalog/namespace.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
}

namespace {

// At most this many queues are named one by one; the rest are summed up in one more line.
constexpr uint64 kNamedQueues = 20;

bool names_jobbuf(Node* statement)
{
    if (!IsA(statement, DropStmt) || castNode(DropStmt, statement)->removeType != OBJECT_EXTENSION)
        return false;
    ListCell* cell;
    foreach (cell, castNode(DropStmt, statement)->objects)
        if (strcmp(strVal(lfirst(cell)), "jobbuf") == 0)
            return true;
    return false;
}

}  // namespace

struct DroppedJobs {
    uint64 queues;
    char** lines;  // one per queue: "<queue>: N jobs (w waiting, s scheduled, c claimed, h held)"
    int64 total;
};

DroppedJobs* jobs_before_drop(Node* statement)
{
    Oid extension = names_jobbuf(statement) ? get_extension_oid("jobbuf", true) : InvalidOid;
    // Only for a caller the drop will let through (it owns the extension): anyone else gets
    // Postgres's own refusal, not an error of this count.
    if (!OidIsValid(extension) || !jobbuf_extension_owned_by(extension, GetUserId()))
        return nullptr;
    Oid schema = get_namespace_oid("jobbuf", true);
    if (!OidIsValid(schema) || !OidIsValid(get_relname_relid("jobs", schema)))
        return nullptr;
    // Held jobs exist from 1.2 on: older SQL has no owner column (its library may be newer).
    bool has_owner = installed_jobbuf().state == InstalledExtension::Current;
    const char* held =
        has_owner ? "pg_catalog.count(*) FILTER (WHERE j.owner OPERATOR(pg_catalog.<>) jobbuf.installation_id())" : "0";
    const char* own = has_owner ? "j.owner OPERATOR(pg_catalog.=) jobbuf.installation_id()" : "true";
    char* sql = psprintf(
        "SELECT pg_catalog.format('queue %%I: %%s job(s) (%%s waiting, %%s scheduled, %%s claimed, %%s held)',"
        "  j.queue, pg_catalog.count(*),"
        "  pg_catalog.count(*) FILTER (WHERE %s AND (j.group_id IS NULL OR j.lease_until OPERATOR(pg_catalog.<=) pg_catalog.now())"
        "                               AND j.run_at OPERATOR(pg_catalog.<=) pg_catalog.now()),"
        "  pg_catalog.count(*) FILTER (WHERE %s AND j.group_id IS NULL AND j.run_at OPERATOR(pg_catalog.>) pg_catalog.now()),"
        "  pg_catalog.count(*) FILTER (WHERE %s AND j.group_id IS NOT NULL AND j.lease_until OPERATOR(pg_catalog.>) pg_catalog.now()),"
        "  %s), pg_catalog.count(*)"
        " FROM jobbuf.jobs j GROUP BY j.queue ORDER BY j.queue",
        own, own, own, held);
    if (SPI_connect() != SPI_OK_CONNECT)
        return nullptr;
    DroppedJobs* dropped = nullptr;
    if (SPI_execute(sql, true, 0) == SPI_OK_SELECT && SPI_processed > 0) {
        MemoryContext outer = CurTransactionContext;  // outlives SPI_finish, lives until the drop is done
        dropped = static_cast<DroppedJobs*>(MemoryContextAllocZero(outer, sizeof(DroppedJobs)));
        dropped->queues = SPI_processed;
        dropped->lines =
            static_cast<char**>(MemoryContextAllocZero(outer, sizeof(char*) * Min(SPI_processed, kNamedQueues)));
        for (uint64 i = 0; i < SPI_processed; i++) {
            bool isnull = false;
            dropped->total += DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
            if (i < kNamedQueues)
                dropped->lines[i] =
                    MemoryContextStrdup(outer, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
        }
    }
    SPI_finish();
    return dropped;
}

void warn_dropped_jobs(const DroppedJobs* dropped)
{
    if (dropped == nullptr)
        return;
    for (uint64 i = 0; i < Min(dropped->queues, kNamedQueues); i++)
        ereport(WARNING, (errmsg("jobbuf: DROP EXTENSION discarded the jobs of %s", dropped->lines[i]),
                          errhint("Before uninstalling, drain the queues first: see docs/uninstalling.md.")));
    if (dropped->queues > kNamedQueues)
        ereport(WARNING,
                (errmsg("jobbuf: DROP EXTENSION discarded " INT64_FORMAT " job(s) in " UINT64_FORMAT " queues in all",
                        dropped->total, dropped->queues)));
}
