// Postgres regime: run_guarded, how the drain worker survives a Postgres error: the error aborts
// the transaction and is logged once (problem_log.h) instead of ending the worker.
#pragma once
#include "pg_includes.h"

#include "status/problem_log.h"

extern "C" {
#include "access/xact.h"
#include "pgstat.h"
}

// Runs fn under PG_TRY. A Postgres error aborts the transaction and is handed to on_error
// (its ErrorData, in the caller's memory context); returns false then, true when fn returned.
template <typename Fn, typename OnError>
inline bool run_catching(Fn fn, OnError on_error)
{
    MemoryContext caller_cxt = CurrentMemoryContext;
    volatile bool ok = true;
    PG_TRY();
    {
        fn();
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(caller_cxt);
        ErrorData* error = CopyErrorData();
        FlushErrorState();
        AbortCurrentTransaction();
        pgstat_report_activity(STATE_IDLE, nullptr);
        on_error(error);
        FreeErrorData(error);
        ok = false;
    }
    PG_END_TRY();
    return ok;
}

// run_catching for the worker's own work: an error is logged once (the caller then reconciles
// and backs off); a call that returns ends the database problem.
template <typename Fn>
inline bool run_guarded(Fn fn)
{
    bool ok = run_catching(fn, [](const ErrorData* error) { report_problem(ProblemKind::Database, error->message); });
    if (ok)
        report_recovered(ProblemKind::Database, "the last database error is resolved");
    return ok;
}
