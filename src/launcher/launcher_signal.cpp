// Postgres regime: the launcher signal (see launcher_signal.h). The transaction callback only
// takes a spinlock, writes a few words and sets a latch: it runs after the commit and cannot fail.
#include "pg_includes.h"

#include "config/shared_state.h"
#include "hooks/commit_wakeup.h"
#include "launcher/launcher_signal.h"

extern "C" {
#include "access/xact.h"
#include "commands/extension.h"
#include "nodes/parsenodes.h"
}

namespace {

bool extension_created = false;  // this transaction ran CREATE EXTENSION jobbuf
bool databases_changed = false;  // this transaction created, altered or renamed a database

void announce(void)
{
    JobbufLauncherState* cluster = jobbuf_cluster;
    if (cluster == nullptr)
        return;
    if (extension_created) {
        SpinLockAcquire(&cluster->mutex);
        bool listed = false;
        for (int i = 0; i < cluster->created_count && !listed; i++)
            listed = cluster->created[i] == MyDatabaseId;
        if (!listed && cluster->created_count < kCreatedPending)
            cluster->created[cluster->created_count++] = MyDatabaseId;
        else if (!listed)
            cluster->created_overflow = true;
        SpinLockRelease(&cluster->mutex);
    }
    if (databases_changed)
        pg_atomic_fetch_add_u32(&cluster->databases_changed, 1);
    Latch* latch = cluster->launcher_latch;
    if (latch != nullptr)
        SetLatch(latch);
}

void on_transaction_event(XactEvent event, void* arg)
{
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
            if (extension_created || databases_changed)
                announce();
            extension_created = databases_changed = false;
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_PREPARE:
            extension_created = databases_changed = false;
            break;
        default:
            break;
    }
}

// DROP EXTENSION jobbuf: the database's worker looks at once (and, found by '*', leaves).
bool drops_jobbuf(const DropStmt* drop)
{
    if (drop->removeType != OBJECT_EXTENSION)
        return false;
    ListCell* cell;
    foreach (cell, drop->objects)
        if (strcmp(strVal(lfirst(cell)), "jobbuf") == 0)
            return true;
    return false;
}

}  // namespace

bool creates_jobbuf(Node* statement)
{
    return IsA(statement, CreateExtensionStmt) &&
           strcmp(castNode(CreateExtensionStmt, statement)->extname, "jobbuf") == 0;
}

void note_database_statement(Node* statement, bool jobbuf_existed)
{
    switch (nodeTag(statement)) {
        case T_CreateExtensionStmt:
            // Only a CREATE EXTENSION that created it: "IF NOT EXISTS" on an installed jobbuf needs no
            // privilege at all, and must not let any role signal the launcher.
            extension_created = extension_created || (creates_jobbuf(statement) && !jobbuf_existed &&
                                                      OidIsValid(get_extension_oid("jobbuf", true)));
            break;
        case T_CreatedbStmt:
        case T_AlterDatabaseStmt:
        case T_DropdbStmt:
            databases_changed = true;
            break;
        case T_DropStmt:
            if (drops_jobbuf(castNode(DropStmt, statement)))
                note_queues_changed();
            break;
        case T_RenameStmt:
            databases_changed = databases_changed || castNode(RenameStmt, statement)->renameType == OBJECT_DATABASE;
            break;
        default:
            break;
    }
}

void register_launcher_signal(void)
{
    RegisterXactCallback(on_transaction_event, nullptr);
}

int take_created_extensions(Oid* out, int max)
{
    JobbufLauncherState* cluster = jobbuf_cluster;
    SpinLockAcquire(&cluster->mutex);
    int count = cluster->created_overflow || cluster->created_count > max ? -1 : cluster->created_count;
    for (int i = 0; i < count; i++)
        out[i] = cluster->created[i];
    cluster->created_count = 0;
    cluster->created_overflow = false;
    SpinLockRelease(&cluster->mutex);
    return count;
}

bool take_databases_changed(uint32* seen)
{
    uint32 now = pg_atomic_read_u32(&jobbuf_cluster->databases_changed);
    bool changed = now != *seen;
    *seen = now;
    return changed;
}
