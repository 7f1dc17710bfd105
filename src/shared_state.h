// Postgres regime: the shared-memory block through which backends wake the worker and through
// which the worker publishes its status (jobbuf_worker_status).
#pragma once
#include "pg_includes.h"

extern "C" {
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/timestamp.h"
}

constexpr int kStatusErrorLen = 256;

struct JobbufSharedState {
    // Wake-up path (commit_wakeup.cpp): committers OR the wake bits of the queues they staged
    // into and set the worker's latch (if published) when the set was empty; the worker takes
    // the set at the start of each drain round. All bits set: look at every queue.
    pg_atomic_uint64 staged_queues;
    // The lowest job id committed since the worker last looked (PG_UINT64_MAX: none): the worker
    // rewinds its queue cursors to it (queue_progress.h).
    pg_atomic_uint64 lowest_staged_id;
    // Bumped after each commit that changed jobbuf.queues: the worker reloads its queue list.
    pg_atomic_uint32 queues_generation;
    Latch* worker_latch;     // the drain worker's MyLatch; NULL when none runs
    Oid worker_database;     // database the drain worker is connected to

    // Status, written by the drain worker; the mutex guards the non-atomic fields.
    slock_t mutex;
    pid_t worker_pid;
    bool redis_connected;
    char last_error[kStatusErrorLen];
    TimestampTz last_error_at;
    pg_atomic_uint64 wakeups;
    pg_atomic_uint64 batches;
    pg_atomic_uint64 delivered;

    // Set by a backend about to DROP the worker's database (only a drop that its checks allow:
    // drop_database_guard.cpp): the launcher keeps the drain worker stopped until this time so
    // that the drop is not blocked by it. Reset when that drop fails.
    TimestampTz pause_until;
    // Bumped by the drain worker each time it leaves its database for a DROP DATABASE: the
    // launcher does not count such an exit as a failure (no restart backoff).
    pg_atomic_uint32 departures_for_drop;
};

// NULL unless jobbuf is in shared_preload_libraries.
extern JobbufSharedState* jobbuf_shared;

void jobbuf_shared_state_install_hooks(void);

// Status updates from the drain worker.
void shared_state_set_error(const char* message);
void shared_state_set_redis_connected(bool connected);
