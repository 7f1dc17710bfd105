// Postgres regime: the commit wake-up. Backend-local state records which queues the transaction
// staged into; the transaction callback, registered once per process, publishes that to the
// drain worker of this backend's database (its slot, found by MyDatabaseId) after the commit and
// sets its latch when the worker had nothing pending. The callback only reads shared memory,
// touches atomics and a latch: it runs after the commit and cannot fail.
#include "pg_includes.h"

#include "config/shared_state.h"
#include "hooks/commit_wakeup.h"

extern "C" {
#include "access/xact.h"
#include "common/hashfn.h"
}

static uint64 staged_queue_bits = 0;  // wake bits of the queues this transaction staged into
constexpr int kLocalQueues = 8;
static uint64 staged_hashes[kLocalQueues];     // their wake hashes, while they fit
static int staged_hash_count = 0;              // kLocalQueues + 1: more queues than fit
static int64 lowest_staged_id = PG_INT64_MAX;  // the lowest job id it staged
static bool queues_changed = false;            // this transaction changed jobbuf.queues
static bool schedules_changed = false;         // this transaction changed jobbuf.schedules

uint64 queue_wake_hash(const char* queue)
{
    return hash_bytes_extended(reinterpret_cast<const unsigned char*>(queue), strlen(queue), 0);
}

static uint64 wake_bit_of_hash(uint64 hash)
{
    return UINT64CONST(1) << (hash % 64);
}

uint64 queue_wake_bit(const char* queue)
{
    return wake_bit_of_hash(queue_wake_hash(queue));
}

void note_jobs_staged(const char* queue, int64 id)
{
    uint64 hash = queue_wake_hash(queue);
    staged_queue_bits |= wake_bit_of_hash(hash);
    lowest_staged_id = Min(lowest_staged_id, id);
    if (staged_hash_count > kLocalQueues)
        return;
    for (int i = 0; i < staged_hash_count; i++)
        if (staged_hashes[i] == hash)
            return;
    if (staged_hash_count < kLocalQueues)
        staged_hashes[staged_hash_count] = hash;
    staged_hash_count++;
}

void note_queues_changed(void)
{
    staged_queue_bits = PG_UINT64_MAX;
    staged_hash_count = kLocalQueues + 1;  // every queue
    queues_changed = true;
}

void note_schedules_changed(void)
{
    schedules_changed = true;
}

// Adds this transaction's queues to the slot's exact list (or marks it overflowed) and their
// bits to staged_queues, under woken_mutex: the worker takes bits, names and overflow together
// (take_staged_work), so it never sees an overflow without the bits it stands for. Returns the
// bits staged_queues held before.
static uint64 name_woken_queues(DrainSlot* slot)
{
    SpinLockAcquire(&slot->woken_mutex);
    if (staged_hash_count > kLocalQueues) {
        slot->woken_overflow = true;
    } else {
        for (int i = 0; i < staged_hash_count && !slot->woken_overflow; i++) {
            int k = 0;
            while (k < slot->woken_count && slot->woken[k] != staged_hashes[i])
                k++;
            if (k == kWokenQueues) {
                slot->woken_overflow = true;
                break;
            }
            if (k == slot->woken_count) {
                slot->woken[k] = staged_hashes[i];
                slot->woken_lowest_id[k] = lowest_staged_id;
                slot->woken_count++;
            } else {
                slot->woken_lowest_id[k] = Min(slot->woken_lowest_id[k], lowest_staged_id);
            }
        }
    }
    uint64 before = pg_atomic_fetch_or_u64(&slot->staged_queues, staged_queue_bits);
    SpinLockRelease(&slot->woken_mutex);
    return before;
}

// The slot of this database's drain worker, remembered between commits (checked each time: the
// launcher may have given it to another database since).
static DrainSlot* my_database_slot(void)
{
    static DrainSlot* remembered = nullptr;
    if (remembered == nullptr || remembered->database != MyDatabaseId || !remembered->in_use)
        remembered = drain_slot_of_database(MyDatabaseId);
    return remembered;
}

static void wake_worker(void)
{
    DrainSlot* slot = my_database_slot();
    if (slot == nullptr)
        return;
    if (queues_changed)
        pg_atomic_fetch_add_u32(&slot->queues_generation, 1);
    if (schedules_changed)
        pg_atomic_fetch_add_u32(&slot->schedules_generation, 1);
    // The lowest id, then the queues' names and bits: a worker that takes the names or bits has
    // the id too (it takes them in the other order, see take_staged_work).
    if (lowest_staged_id != PG_INT64_MAX) {
        uint64 id = static_cast<uint64>(lowest_staged_id);
        uint64 seen = pg_atomic_read_u64(&slot->lowest_staged_id);
        while (id < seen && !pg_atomic_compare_exchange_u64(&slot->lowest_staged_id, &seen, id)) {
        }
    }
    // The exact queues and their bits, together.
    uint64 bits_before = name_woken_queues(slot);
    // One SetLatch per burst of commits: the worker empties staged_queues when it starts a pass,
    // so only the first commit after that finds it empty and sets the latch. While the worker is
    // busy or disabled the set stays non-empty and committers send no wake-up. A change of
    // jobbuf.queues (rare: administration, ALTER EXTENSION UPDATE) always wakes the worker.
    if (bits_before == 0 || queues_changed || schedules_changed) {
        Latch* latch = slot->worker_latch;
        if (latch != nullptr)
            SetLatch(latch);
    }
}

static void forget_transaction(void)
{
    staged_queue_bits = 0;
    staged_hash_count = 0;
    lowest_staged_id = PG_INT64_MAX;
    queues_changed = false;
    schedules_changed = false;
}

StagedWork take_staged_work(void)
{
    StagedWork work;
    work.queue_bits = PG_UINT64_MAX;
    work.lowest_id = PG_INT64_MAX;
    work.exact = false;
    work.count = 0;
    if (my_drain_slot == nullptr)
        return work;
    // Bits and names (or overflow) together, under woken_mutex, as committers publish them; the
    // id after them: committers publish it first, so the queues a commit named come with its id.
    SpinLockAcquire(&my_drain_slot->woken_mutex);
    work.queue_bits = pg_atomic_exchange_u64(&my_drain_slot->staged_queues, 0);
    work.exact = !my_drain_slot->woken_overflow;
    work.count = my_drain_slot->woken_count;
    memcpy(work.hashes, my_drain_slot->woken, sizeof(uint64) * work.count);
    memcpy(work.lowest_ids, my_drain_slot->woken_lowest_id, sizeof(int64) * work.count);
    my_drain_slot->woken_count = 0;
    my_drain_slot->woken_overflow = false;
    SpinLockRelease(&my_drain_slot->woken_mutex);
    uint64 id = pg_atomic_exchange_u64(&my_drain_slot->lowest_staged_id, PG_UINT64_MAX);
    if (id != PG_UINT64_MAX)
        work.lowest_id = static_cast<int64>(id);
    return work;
}

static void on_transaction_event(XactEvent event, void* arg)
{
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
            if (staged_queue_bits != 0 || schedules_changed)
                wake_worker();
            forget_transaction();
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_PREPARE:  // COMMIT PREPARED runs elsewhere: the worker's head passes cover it
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
