// Postgres regime: the shared-memory block through which backends wake the drain workers, the
// launcher learns of CREATE EXTENSION / CREATE DATABASE, and each drain worker publishes its
// status (jobbuf_worker_status). One slot per drain worker (jobbuf.max_workers of them), plus one
// for the launcher's short-lived probe of a database (does it have the extension?).
#pragma once
#include "pg_includes.h"

extern "C" {
#include "port/atomics.h"
#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/timestamp.h"
}

constexpr int kStatusErrorLen = 256;
// Distinct queues a drain worker's slot names exactly between two looks (commit_wakeup.h).
constexpr int kWokenQueues = 64;

// Why a drain worker (or the probe) left, written just before it exits: the launcher decides
// from it what to do next. A crash or an error leaves Unknown: restart with backoff. A drain
// worker that SIGTERM ended notes Terminated on its way out (unless it noted another reason first).
enum class WorkerExit : uint32 {
    Unknown = 0,
    NoExtension,      // jobbuf is not installed there (or was dropped): no worker until CREATE EXTENSION
    HasExtension,     // the probe found jobbuf installed
    LeftForDrop,      // a DROP DATABASE waits for it: restart without backoff once the pause ends
    SettingsChanged,  // ALTER DATABASE ... SET jobbuf.redis_* and a reload: restart now
    Terminated,       // ended by SIGTERM (pg_terminate_backend): restart now, no backoff
};

// One drain worker's slot.
struct DrainSlot {
    // Assignment, written by the launcher while no worker runs in the slot.
    bool in_use;
    bool waits_for_extension;  // a database named in jobbuf.database: wait for CREATE EXTENSION
    Oid database;              // InvalidOid when free
    char database_name[NAMEDATALEN];
    pg_atomic_uint32 exit_reason;  // a WorkerExit
    // Set by the worker (or the probe) once connected to the database; the launcher stops one
    // that does not get there in time (waiting in InitPostgres behind a lock) and frees its slot.
    pg_atomic_uint32 connected;

    // Commit wake-up (commit_wakeup.cpp): committers OR the wake bits of the queues they staged
    // into and set the worker's latch (if published) when the set was empty; the worker takes
    // the set at the start of each pass. All bits set: look at every queue.
    pg_atomic_uint64 staged_queues;
    // The exact queues behind those bits: committers add their queues' wake hashes here (under
    // woken_mutex) before they OR the bits; more than fit sets woken_overflow, and the worker
    // then goes by the bits alone. Taken with the bits.
    slock_t woken_mutex;
    int woken_count;
    bool woken_overflow;
    uint64 woken[kWokenQueues];           // wake hashes
    int64 woken_lowest_id[kWokenQueues];  // the lowest job id a commit naming that queue staged
    // The lowest job id committed since the worker last looked (PG_UINT64_MAX: none): the worker
    // rewinds its queue cursors to it (queue_progress.h).
    pg_atomic_uint64 lowest_staged_id;
    // Bumped after each commit that changed jobbuf.queues: the worker reloads its queue list.
    pg_atomic_uint32 queues_generation;
    // Bumped after each commit that changed jobbuf.schedules: the worker reads its next tick again.
    pg_atomic_uint32 schedules_generation;
    Latch* worker_latch;  // the drain worker's MyLatch; NULL when none runs

    // Status, written by the drain worker; the mutex guards the non-atomic fields.
    slock_t mutex;
    pid_t worker_pid;
    bool redis_connected;
    char last_error[kStatusErrorLen];
    TimestampTz last_error_at;
    pg_atomic_uint64 wakeups;
    pg_atomic_uint64 batches;
    pg_atomic_uint64 delivered;

    // Set by a backend about to DROP the slot's database (only a drop that its checks allow:
    // drop_database_guard.cpp): the launcher keeps the drain worker stopped until this time so
    // that the drop is not blocked by it. Reset when that drop fails.
    TimestampTz pause_until;
};

// Databases that CREATE EXTENSION jobbuf named since the launcher last looked; more than fit
// makes the launcher look at every database it knows without the extension.
constexpr int kCreatedPending = 64;
// Databases left without a worker by jobbuf.max_workers that jobbuf_worker_status() can name.
constexpr int kLeftOutShown = 64;

struct JobbufLauncherState {
    Latch* launcher_latch;  // NULL while no launcher runs
    slock_t mutex;          // guards the lists below
    int created_count;
    bool created_overflow;
    Oid created[kCreatedPending];
    // Bumped by CREATE / ALTER / RENAME DATABASE: the launcher reads pg_database again.
    pg_atomic_uint32 databases_changed;
    int left_out_count;  // all of them; the first kLeftOutShown are named below
    Oid left_out[kLeftOutShown];
    char left_out_names[kLeftOutShown][NAMEDATALEN];
    int drain_slots;  // jobbuf.max_workers; slots[drain_slots] is the probe's
    DrainSlot slots[FLEXIBLE_ARRAY_MEMBER];
};

// NULL unless jobbuf is in shared_preload_libraries.
extern JobbufLauncherState* jobbuf_cluster;
// In a drain worker: its own slot; NULL in every other process.
extern DrainSlot* my_drain_slot;

void jobbuf_shared_state_install_hooks(void);

inline int probe_slot_index(void)
{
    return jobbuf_cluster->drain_slots;
}

// The slot of the drain worker assigned to database, or NULL (not preloaded, or none). Reads
// without a lock: a slot reassigned meanwhile costs a needless wake-up at most.
DrainSlot* drain_slot_of_database(Oid database);

// Launcher side: (re)initializes a free slot for database; frees it.
void drain_slot_assign(DrainSlot* slot, Oid database, const char* name, bool waits_for_extension);
void drain_slot_release(DrainSlot* slot);

// Status updates from the drain worker.
void shared_state_set_error(const char* message);
// Replaces last_error's text without touching last_error_at (empty: no problem now).
void shared_state_show_error(const char* message);
void shared_state_set_redis_connected(bool connected);
// Records why this drain worker is about to exit (see WorkerExit).
void shared_state_note_exit(WorkerExit reason);
// The database of this drain worker, for messages.
const char* drain_database_name(void);
