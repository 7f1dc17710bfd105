// Postgres regime: allocation and accessors of the shared-memory block (see shared_state.h).
#include "pg_includes.h"

#include "shared_state.h"

extern "C" {
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
}

JobbufSharedState* jobbuf_shared = nullptr;

static shmem_request_hook_type previous_shmem_request_hook = nullptr;
static shmem_startup_hook_type previous_shmem_startup_hook = nullptr;

static void request_shared_state(void)
{
    if (previous_shmem_request_hook)
        previous_shmem_request_hook();
    RequestAddinShmemSpace(MAXALIGN(sizeof(JobbufSharedState)));
}

static void attach_shared_state(void)
{
    if (previous_shmem_startup_hook)
        previous_shmem_startup_hook();

    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    auto* state = static_cast<JobbufSharedState*>(
        ShmemInitStruct("jobbuf", sizeof(JobbufSharedState), &found));
    if (!found) {
        memset(state, 0, sizeof(*state));
        pg_atomic_init_u64(&state->staged_queues, PG_UINT64_MAX);  // the first round looks everywhere
        pg_atomic_init_u32(&state->queues_generation, 0);
        pg_atomic_init_u64(&state->lowest_staged_id, PG_UINT64_MAX);
        pg_atomic_init_u64(&state->wakeups, 0);
        pg_atomic_init_u64(&state->batches, 0);
        pg_atomic_init_u64(&state->delivered, 0);
        pg_atomic_init_u32(&state->departures_for_drop, 0);
        SpinLockInit(&state->mutex);
        state->worker_latch = nullptr;
        state->worker_database = InvalidOid;
    }
    jobbuf_shared = state;
    LWLockRelease(AddinShmemInitLock);
}

void jobbuf_shared_state_install_hooks(void)
{
    previous_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = request_shared_state;
    previous_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = attach_shared_state;
}

void shared_state_set_error(const char* message)
{
    if (!jobbuf_shared)
        return;
    TimestampTz now = GetCurrentTimestamp();
    SpinLockAcquire(&jobbuf_shared->mutex);
    strlcpy(jobbuf_shared->last_error, message, kStatusErrorLen);
    jobbuf_shared->last_error_at = now;
    SpinLockRelease(&jobbuf_shared->mutex);
}

void shared_state_set_redis_connected(bool connected)
{
    if (!jobbuf_shared)
        return;
    SpinLockAcquire(&jobbuf_shared->mutex);
    jobbuf_shared->redis_connected = connected;
    SpinLockRelease(&jobbuf_shared->mutex);
}
