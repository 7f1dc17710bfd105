// Postgres regime: a ProcessUtility hook that, before DROP DATABASE of jobbuf.database, asks the
// drain worker to disconnect and the launcher to keep it away for a while. Without it, a plain
// DROP DATABASE fails with "database is being accessed by other users" for as long as jobbuf is
// installed. If the drop fails for another reason, the launcher restarts the worker afterwards.
#include "pg_includes.h"

#include "drop_database_guard.h"
#include "settings.h"
#include "shared_state.h"

extern "C" {
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/timestamp.h"
}

namespace {

constexpr int kKeepAwayMs = 10 * 1000;

ProcessUtility_hook_type previous_process_utility = nullptr;

void ask_worker_to_leave(void)
{
    JobbufSharedState* s = jobbuf_shared;
    if (s == nullptr)
        return;
    s->pause_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kKeepAwayMs);
    pg_memory_barrier();
    Latch* latch = s->worker_latch;
    if (latch != nullptr)
        SetLatch(latch);
}

void guard_process_utility(PlannedStmt* pstmt, const char* query_string, bool read_only_tree,
                           ProcessUtilityContext context, ParamListInfo params,
                           QueryEnvironment* query_env, DestReceiver* dest, QueryCompletion* qc)
{
    Node* statement = pstmt->utilityStmt;
    if (IsA(statement, DropdbStmt) && jobbuf_database != nullptr &&
        strcmp(castNode(DropdbStmt, statement)->dbname, jobbuf_database) == 0)
        ask_worker_to_leave();

    if (previous_process_utility)
        previous_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
}

}  // namespace

void install_drop_database_guard(void)
{
    previous_process_utility = ProcessUtility_hook;
    ProcessUtility_hook = guard_process_utility;
}

bool drain_worker_must_leave(void)
{
    return jobbuf_shared != nullptr && jobbuf_shared->pause_until > GetCurrentTimestamp();
}
