// Postgres regime: what the ProcessUtility hook (utility_hook.h) does around DROP DATABASE of a
// database with a drain worker: it asks that worker to disconnect and the launcher to keep it away
// for a while (the other databases' workers are not touched). Without it, a plain
// DROP DATABASE fails with "database is being accessed by other users" for as long as jobbuf is
// installed.
//
// The hook runs before Postgres decides whether the caller may drop the database, so it first
// makes the checks dropdb() makes before it looks at other sessions (a top-level statement
// outside a transaction block; the database exists; the caller owns it or is a superuser; it is
// not a template, not the caller's own database, not used by replication slots). A DROP DATABASE
// that would be refused leaves the worker alone: no role can pause delivery by trying. If an
// allowed drop still fails (other sessions connected), the request is withdrawn at once and the
// launcher restarts the worker without backoff.
#include "pg_includes.h"
#include "pg_compat.h"

#include "config/settings.h"
#include "config/shared_state.h"
#include "hooks/drop_database_guard.h"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "replication/slot.h"
#include "storage/latch.h"
#include "storage/procarray.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

namespace {

constexpr int kKeepAwayMs = 10 * 1000;
constexpr int kForceWaitMs = 5 * 1000;

}  // namespace

// Whether dropdb() will get past its checks of the caller and the database, as far as they can
// be known before it runs (the wait for other sessions comes after them).
bool drop_would_be_allowed(const char* dbname, ProcessUtilityContext context)
{
    if (context != PROCESS_UTILITY_TOPLEVEL || IsTransactionBlock() || IsSubTransaction())
        return false;  // PreventInTransactionBlock refuses it
    Oid database = get_database_oid(dbname, true);
    if (!OidIsValid(database) || database == MyDatabaseId || !jobbuf_database_owned_by(database, GetUserId()))
        return false;
    HeapTuple tuple = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(database));
    if (!HeapTupleIsValid(tuple))
        return false;
    bool is_template = reinterpret_cast<Form_pg_database>(GETSTRUCT(tuple))->datistemplate;
    ReleaseSysCache(tuple);
    int slots = 0, active_slots = 0;
    return !is_template && !ReplicationSlotsCountDBSlots(database, &slots, &active_slots);
}

// Returns the pause it set, for withdraw_request.
TimestampTz ask_worker_to_leave(DrainSlot* s)
{
    TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kKeepAwayMs);
    s->pause_until = until;
    pg_memory_barrier();
    Latch* latch = s->worker_latch;
    if (latch != nullptr)
        SetLatch(latch);
    return until;
}

// DROP DATABASE ... WITH (FORCE) terminates the database's sessions at once, and may terminate
// only those of roles the caller is a member of: the drain worker is not one for a database
// owner who is not a superuser, and the drop would fail for as long as the worker has not left.
// Such a drop first waits (at most kForceWaitMs) for the worker it asked to leave to be gone.
bool drop_is_forced(const DropdbStmt* stmt)
{
    ListCell* cell;
    foreach (cell, stmt->options) {
        auto* option = static_cast<DefElem*>(lfirst(cell));
        if (strcmp(option->defname, "force") == 0)
            return true;
    }
    return false;
}

void wait_for_worker_to_leave(pid_t pid)
{
    TimestampTz give_up = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kForceWaitMs);
    while (pid != 0 && BackendPidGetProc(pid) != nullptr && GetCurrentTimestamp() < give_up) {
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}

// The drop failed: the worker may come back now (unless another drop asked for a later pause).
void withdraw_request(DrainSlot* s, TimestampTz until)
{
    if (s->pause_until == until)
        s->pause_until = 0;
}

bool drain_worker_must_leave(void)
{
    return my_drain_slot != nullptr && my_drain_slot->pause_until > GetCurrentTimestamp();
}

void note_departure_for_drop(void)
{
    shared_state_note_exit(WorkerExit::LeftForDrop);
}
