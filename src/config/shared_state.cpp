// Postgres regime: allocation and accessors of the shared-memory block (see shared_state.h).
#include "pg_includes.h"

#include "config/settings.h"
#include "config/shared_state.h"

extern "C" {
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
}

JobbufLauncherState* jobbuf_cluster = nullptr;
DrainSlot* my_drain_slot = nullptr;

static shmem_request_hook_type previous_shmem_request_hook = nullptr;
static shmem_startup_hook_type previous_shmem_startup_hook = nullptr;

static Size shared_state_size(void)
{
    return add_size(offsetof(JobbufLauncherState, slots),
                    mul_size(static_cast<Size>(jobbuf_max_workers) + 1, sizeof(DrainSlot)));
}

static void request_shared_state(void)
{
    if (previous_shmem_request_hook)
        previous_shmem_request_hook();
    RequestAddinShmemSpace(MAXALIGN(shared_state_size()));
}

// Everything but the mutex (which jobbuf_worker_status may hold while the launcher reuses a slot).
static void reset_slot(DrainSlot* slot)
{
    slot->in_use = false;
    slot->waits_for_extension = false;
    slot->database = InvalidOid;
    slot->database_name[0] = '\0';
    slot->worker_latch = nullptr;
    SpinLockAcquire(&slot->mutex);
    slot->worker_pid = 0;
    slot->redis_connected = false;
    slot->last_error[0] = '\0';
    slot->last_error_at = 0;
    SpinLockRelease(&slot->mutex);
    slot->pause_until = 0;
    pg_atomic_init_u32(&slot->exit_reason, static_cast<uint32>(WorkerExit::Unknown));
    pg_atomic_init_u32(&slot->connected, 0);
    pg_atomic_init_u64(&slot->staged_queues, PG_UINT64_MAX);  // the first round looks everywhere
    SpinLockAcquire(&slot->woken_mutex);
    slot->woken_count = 0;
    slot->woken_overflow = true;
    SpinLockRelease(&slot->woken_mutex);
    pg_atomic_init_u32(&slot->queues_generation, 0);
    pg_atomic_init_u32(&slot->schedules_generation, 0);
    pg_atomic_init_u64(&slot->lowest_staged_id, PG_UINT64_MAX);
    pg_atomic_init_u64(&slot->wakeups, 0);
    pg_atomic_init_u64(&slot->batches, 0);
    pg_atomic_init_u64(&slot->delivered, 0);
}

static void init_slot(DrainSlot* slot)
{
    memset(slot, 0, sizeof(*slot));
    SpinLockInit(&slot->mutex);
    SpinLockInit(&slot->woken_mutex);
    reset_slot(slot);
}

static void attach_shared_state(void)
{
    if (previous_shmem_startup_hook)
        previous_shmem_startup_hook();

    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    auto* state = static_cast<JobbufLauncherState*>(ShmemInitStruct("jobbuf", shared_state_size(), &found));
    if (!found) {
        memset(state, 0, offsetof(JobbufLauncherState, slots));
        SpinLockInit(&state->mutex);
        pg_atomic_init_u32(&state->databases_changed, 0);
        state->drain_slots = jobbuf_max_workers;
        for (int i = 0; i <= jobbuf_max_workers; i++)
            init_slot(&state->slots[i]);
    }
    jobbuf_cluster = state;
    LWLockRelease(AddinShmemInitLock);
}

void jobbuf_shared_state_install_hooks(void)
{
    previous_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = request_shared_state;
    previous_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = attach_shared_state;
}

DrainSlot* drain_slot_of_database(Oid database)
{
    if (jobbuf_cluster == nullptr)
        return nullptr;
    for (int i = 0; i < jobbuf_cluster->drain_slots; i++) {
        DrainSlot* slot = &jobbuf_cluster->slots[i];
        if (slot->database == database && slot->in_use)
            return slot;
    }
    return nullptr;
}

void drain_slot_assign(DrainSlot* slot, Oid database, const char* name, bool waits_for_extension)
{
    reset_slot(slot);
    strlcpy(slot->database_name, name, NAMEDATALEN);
    slot->waits_for_extension = waits_for_extension;
    slot->database = database;
    pg_write_barrier();
    slot->in_use = true;
}

void drain_slot_release(DrainSlot* slot)
{
    slot->in_use = false;
    pg_write_barrier();
    slot->database = InvalidOid;
}

void shared_state_set_error(const char* message)
{
    if (!my_drain_slot)
        return;
    TimestampTz now = GetCurrentTimestamp();
    SpinLockAcquire(&my_drain_slot->mutex);
    strlcpy(my_drain_slot->last_error, message, kStatusErrorLen);
    my_drain_slot->last_error_at = now;
    SpinLockRelease(&my_drain_slot->mutex);
}

void shared_state_show_error(const char* message)
{
    if (!my_drain_slot)
        return;
    SpinLockAcquire(&my_drain_slot->mutex);
    strlcpy(my_drain_slot->last_error, message, kStatusErrorLen);
    SpinLockRelease(&my_drain_slot->mutex);
}

void shared_state_set_redis_connected(bool connected)
{
    if (!my_drain_slot)
        return;
    SpinLockAcquire(&my_drain_slot->mutex);
    my_drain_slot->redis_connected = connected;
    SpinLockRelease(&my_drain_slot->mutex);
}

void shared_state_note_exit(WorkerExit reason)
{
    if (my_drain_slot)
        pg_atomic_write_u32(&my_drain_slot->exit_reason, static_cast<uint32>(reason));
}

const char* drain_database_name(void)
{
    return my_drain_slot ? my_drain_slot->database_name : "";
}
