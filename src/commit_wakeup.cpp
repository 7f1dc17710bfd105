// Postgres regime: the commit wake-up. Backend-local state records which queues the transaction
// staged into; the transaction callback, registered once per process, publishes that to the
// worker after the commit and sets its latch when the worker had nothing pending. The callback
// only touches atomics and a latch: it runs after the commit and cannot fail.
#include "pg_includes.h"

#include "commit_wakeup.h"
#include "shared_state.h"

extern "C" {
#include "access/xact.h"
#include "common/hashfn.h"
}

static uint64 staged_queue_bits = 0;    // wake bits of the queues this transaction staged into
static bool queues_changed = false;     // this transaction changed jobbuf.queues

uint64 queue_wake_bit(const char* queue)
{
    return UINT64CONST(1) << (hash_bytes(reinterpret_cast<const unsigned char*>(queue), strlen(queue)) % 64);
}

void note_jobs_staged(const char* queue)
{
    staged_queue_bits |= queue_wake_bit(queue);
}

void note_queues_changed(void)
{
    staged_queue_bits = PG_UINT64_MAX;
    queues_changed = true;
}

static void wake_worker(void)
{
    JobbufSharedState* state = jobbuf_shared;
    if (state == nullptr || state->worker_database != MyDatabaseId)
        return;
    if (queues_changed)
        pg_atomic_fetch_add_u32(&state->queues_generation, 1);
    // One SetLatch per batch of commits: the worker empties staged_queues when it starts a round,
    // so only the first commit after that finds it empty and sets the latch. While the worker is
    // busy or disabled the set stays non-empty and committers send no signal.
    if (pg_atomic_fetch_or_u64(&state->staged_queues, staged_queue_bits) == 0) {
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
        if (staged_queue_bits != 0)
            wake_worker();
        staged_queue_bits = 0;
        queues_changed = false;
        break;
    case XACT_EVENT_ABORT:
    case XACT_EVENT_PARALLEL_ABORT:
    case XACT_EVENT_PREPARE:  // COMMIT PREPARED runs elsewhere: the worker's full rounds cover it
        staged_queue_bits = 0;
        queues_changed = false;
        break;
    default:
        break;
    }
}

void register_commit_wakeup(void)
{
    RegisterXactCallback(on_transaction_event, nullptr);
}
