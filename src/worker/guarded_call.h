// Postgres regime: run_guarded, how the drain worker survives a Postgres error: the error aborts
// the transaction and is logged once (problem_log.h) instead of ending the worker.
#pragma once
#include "pg_includes.h"

#include "worker/problem_log.h"

extern "C" {
#include "access/xact.h"
#include "pgstat.h"
}

// Runs fn under PG_TRY. A Postgres error aborts the transaction, is logged once, and returns
// false (the caller then reconciles and backs off); true when fn returned.
template <typename Fn>
inline bool run_guarded(Fn fn)
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
        report_problem(ProblemKind::Database, error->message);
        FreeErrorData(error);
        ok = false;
    }
    PG_END_TRY();
    if (ok)
        report_recovered(ProblemKind::Database, "the last database error is resolved");
    return ok;
}

