// Postgres regime: the commit wake-up. A backend-local flag records that the transaction staged
// jobs; the transaction callback, registered once per process, sets the worker's latch after the
// commit. The callback only touches an atomic and a latch: it runs after the commit and cannot fail.
#include "pg_includes.h"

#include "commit_wakeup.h"
#include "shared_state.h"

extern "C" {
#include "access/xact.h"
}

static bool jobs_staged_in_transaction = false;

void note_jobs_staged(void)
{
    jobs_staged_in_transaction = true;
}

static void wake_worker(void)
{
    JobbufSharedState* state = jobbuf_shared;
    if (state == nullptr || state->worker_database != MyDatabaseId)
        return;
    // One SetLatch per batch of commits: the worker clears wake_requested before it scans, so a
    // commit after that scan starts sets the latch again.
    if (pg_atomic_exchange_u32(&state->wake_requested, 1) == 0) {
        Latch* latch = state->worker_latch;
        if (latch != nullptr)
            SetLatch(latch);
    }
}

static void on_transaction_event(XactEvent event, void* arg)
{
    switch (event) {
    case XACT_EVENT_COMMIT:
    case XACT_EVENT_PARALLEL_COMMIT:
        if (jobs_staged_in_transaction)
            wake_worker();
        jobs_staged_in_transaction = false;
        break;
    case XACT_EVENT_ABORT:
    case XACT_EVENT_PARALLEL_ABORT:
    case XACT_EVENT_PREPARE:  // COMMIT PREPARED runs elsewhere: the poll interval covers it
        jobs_staged_in_transaction = false;
        break;
    default:
        break;
    }
}

void register_commit_wakeup(void)
{
    RegisterXactCallback(on_transaction_event, nullptr);
}
