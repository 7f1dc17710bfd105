// Postgres regime: the ProcessUtility hook (see utility_hook.h). It owns only the dispatch and the
// chaining to the previous hook; what each statement needs lives in the files it calls.
#include "pg_includes.h"

#include "config/shared_state.h"
#include "hooks/drop_database_guard.h"
#include "hooks/drop_extension_report.h"
#include "hooks/utility_hook.h"
#include "launcher/launcher_signal.h"

extern "C" {
#include "catalog/pg_database.h"  // get_database_oid (19; commands/dbcommands.h before)
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
}

namespace {

ProcessUtility_hook_type previous_process_utility = nullptr;

void run_utility(PlannedStmt* pstmt, const char* query_string, bool read_only_tree, ProcessUtilityContext context,
                 ParamListInfo params, QueryEnvironment* query_env, DestReceiver* dest, QueryCompletion* qc)
{
    if (previous_process_utility)
        previous_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
}

void jobbuf_process_utility(PlannedStmt* pstmt, const char* query_string, bool read_only_tree,
                            ProcessUtilityContext context, ParamListInfo params, QueryEnvironment* query_env,
                            DestReceiver* dest, QueryCompletion* qc)
{
    Node* statement = pstmt->utilityStmt;
    const bool jobbuf_existed = creates_jobbuf(statement) && OidIsValid(get_extension_oid("jobbuf", true));
    const char* dbname = IsA(statement, DropdbStmt) ? castNode(DropdbStmt, statement)->dbname : nullptr;
    DrainSlot* slot = dbname != nullptr ? drain_slot_of_database(get_database_oid(dbname, true)) : nullptr;
    if (slot == nullptr || !drop_would_be_allowed(dbname, context)) {
        DroppedJobs* dropped = jobs_before_drop(statement);
        run_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
        warn_dropped_jobs(dropped);
        note_database_statement(statement, jobbuf_existed);
        return;
    }
    pid_t worker_pid = slot->worker_pid;
    volatile TimestampTz until = ask_worker_to_leave(slot);
    PG_TRY();
    {
        if (drop_is_forced(castNode(DropdbStmt, statement)))
            wait_for_worker_to_leave(worker_pid);
        run_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
    }
    PG_CATCH();
    {
        withdraw_request(slot, until);
        PG_RE_THROW();
    }
    PG_END_TRY();
    note_database_statement(statement, jobbuf_existed);
}

}  // namespace

void install_utility_hook(void)
{
    previous_process_utility = ProcessUtility_hook;
    ProcessUtility_hook = jobbuf_process_utility;
}
