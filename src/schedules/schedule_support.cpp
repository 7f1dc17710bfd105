// Postgres regime: the small SQL-callable helpers of jobbuf_schedule (70_schedules.sql): the
// calling role it records as a schedule's owner, whether a drain worker serves this database,
// and the trigger through which a change of jobbuf.schedules wakes that worker.
#include "pg_includes.h"

#include "config/shared_state.h"
#include "hooks/commit_wakeup.h"
#include "launcher/database_list.h"

extern "C" {
#include "commands/dbcommands.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
}

// The role that called from outside every SECURITY DEFINER function: the session's current role
// (SET ROLE included), not the definer jobbuf_schedule runs as.
JOBBUF_SQL_FUNCTION(jobbuf_calling_role)
{
    const char* role = GetUserNameFromId(GetOuterUserId(), false);
    Name result = static_cast<Name>(palloc0(NAMEDATALEN));
    namestrcpy(result, role);
    PG_RETURN_NAME(result);
}

// True when a drain worker runs in this database or the launcher will start one: the library is
// preloaded, jobbuf.database takes this database, and jobbuf.max_workers did not leave it out.
JOBBUF_SQL_FUNCTION(jobbuf_database_has_worker)
{
    if (jobbuf_cluster == nullptr)
        PG_RETURN_BOOL(false);
    if (drain_slot_of_database(MyDatabaseId) != nullptr)
        PG_RETURN_BOOL(true);
    const char* datname = get_database_name(MyDatabaseId);
    if (datname == nullptr || (!database_list_is_every() && !database_list_names(datname)))
        PG_RETURN_BOOL(false);
    bool left_out = false;
    SpinLockAcquire(&jobbuf_cluster->mutex);
    for (int i = 0; i < Min(jobbuf_cluster->left_out_count, kLeftOutShown); i++)
        left_out = left_out || jobbuf_cluster->left_out[i] == MyDatabaseId;
    if (jobbuf_cluster->left_out_count > kLeftOutShown)
        left_out = true;  // more than it names: this one may be among them
    SpinLockRelease(&jobbuf_cluster->mutex);
    PG_RETURN_BOOL(!left_out);
}

// AFTER ... FOR EACH STATEMENT on jobbuf.schedules: the commit wakes the drain worker, which
// reads its next tick again. The worker's own changes (staging ticks) do not: it knows already.
JOBBUF_SQL_FUNCTION(jobbuf_schedules_changed_trigger)
{
    if (!CALLED_AS_TRIGGER(fcinfo))
        ereport(ERROR, (errmsg("jobbuf: schedules_changed_trigger must be called as a trigger")));
    if (my_drain_slot == nullptr)
        note_schedules_changed();
    return PointerGetDatum(NULL);  // not nullptr: PostgreSQL 19's PointerGetDatum() refuses it
}
