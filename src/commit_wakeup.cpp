// Postgres regime: the commit wake-up. Backend-local state records which queues the transaction
// staged into; the transaction callback, registered once per process, publishes that to the
// drain worker of this backend's database (its slot, found by MyDatabaseId) after the commit and
// sets its latch when the worker had nothing pending. The callback only reads shared memory,
// touches atomics and a latch: it runs after the commit and cannot fail.
#include "pg_includes.h"

#include "commit_wakeup.h"
#include "shared_state.h"

extern "C" {
#include "access/xact.h"
#include "common/hashfn.h"
}

static uint64 staged_queue_bits = 0;    // wake bits of the queues this transaction staged into
static int64 lowest_staged_id = PG_INT64_MAX;  // the lowest job id it staged
static bool queues_changed = false;     // this transaction changed jobbuf.queues

uint64 queue_wake_bit(const char* queue)
{
    return UINT64CONST(1) << (hash_bytes(reinterpret_cast<const unsigned char*>(queue), strlen(queue)) % 64);
}

void note_jobs_staged(const char* queue, int64 id)
{
    staged_queue_bits |= queue_wake_bit(queue);
    lowest_staged_id = Min(lowest_staged_id, id);
}

void note_queues_changed(void)
{
    staged_queue_bits = PG_UINT64_MAX;
    queues_changed = true;
}

// The slot of this database's drain worker, remembered between commits (checked each time: the
// launcher may have given it to another database since).
static JobbufSharedState* my_database_slot(void)
{
    static JobbufSharedState* remembered = nullptr;
    if (remembered == nullptr || remembered->database != MyDatabaseId || !remembered->in_use)
        remembered = drain_slot_of_database(MyDatabaseId);
    return remembered;
}

static void wake_worker(void)
{
    JobbufSharedState* state = my_database_slot();
    if (state == nullptr)
        return;
    if (queues_changed)
        pg_atomic_fetch_add_u32(&state->queues_generation, 1);
    // The lowest id before the queue bits: a worker that takes the bits has the id too (it takes
    // them in the other order, see take_staged_work).
    if (lowest_staged_id != PG_INT64_MAX) {
        uint64 id = static_cast<uint64>(lowest_staged_id);
        uint64 seen = pg_atomic_read_u64(&state->lowest_staged_id);
        while (id < seen && !pg_atomic_compare_exchange_u64(&state->lowest_staged_id, &seen, id)) {
        }
    }
    // One SetLatch per batch of commits: the worker empties staged_queues when it starts a round,
    // so only the first commit after that finds it empty and sets the latch. While the worker is
    // busy or disabled the set stays non-empty and committers send no signal. A change of
    // jobbuf.queues (rare: administration, ALTER EXTENSION UPDATE) always signals.
    if (pg_atomic_fetch_or_u64(&state->staged_queues, staged_queue_bits) == 0 || queues_changed) {
        Latch* latch = state->worker_latch;
        if (latch != nullptr)
            SetLatch(latch);
    }
}

static void forget_transaction(void)
{
    staged_queue_bits = 0;
    lowest_staged_id = PG_INT64_MAX;
    queues_changed = false;
}

StagedWork take_staged_work(void)
{
    StagedWork work{PG_UINT64_MAX, PG_INT64_MAX};
    if (jobbuf_shared == nullptr)
        return work;
    // Bits first, then the id: committers publish in the opposite order.
    work.queue_bits = pg_atomic_exchange_u64(&jobbuf_shared->staged_queues, 0);
    uint64 id = pg_atomic_exchange_u64(&jobbuf_shared->lowest_staged_id, PG_UINT64_MAX);
    if (id != PG_UINT64_MAX)
        work.lowest_id = static_cast<int64>(id);
    return work;
}

static void on_transaction_event(XactEvent event, void* arg)
{
    switch (event) {
    case XACT_EVENT_COMMIT:
    case XACT_EVENT_PARALLEL_COMMIT:
        if (staged_queue_bits != 0)
            wake_worker();
        forget_transaction();
        break;
    case XACT_EVENT_ABORT:
    case XACT_EVENT_PARALLEL_ABORT:
    case XACT_EVENT_PREPARE:  // COMMIT PREPARED runs elsewhere: the worker's full rounds cover it
        forget_transaction();
        break;
    default:
        break;
    }
}

void register_commit_wakeup(void)
{
    RegisterXactCallback(on_transaction_event, nullptr);
}
