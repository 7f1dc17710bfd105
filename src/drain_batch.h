// Postgres regime: one batch of the drain (take jobs, push them as one Redis unit, delete them in
// the same transaction) and the reconciliation that makes a crash between push and commit safe.
#pragma once
#include "pg_includes.h"

#include "latch_io_waiter.h"
#include "redis/drain_session.h"

struct ActiveQueue {
    char name[NAMEDATALEN];
    jobbuf::redis::TargetSpec spec;  // strings point into the worker's queue-list context
    int batch_size;                  // 0: jobbuf.batch_size (group delivery: jobbuf_claim's default)
    bool group_delivery;             // delivery 'group': one message per claimed group
    const char* group_class;         // sidekiq group delivery: the job class given [group_id]
};

struct DrainContext {
    jobbuf::redis::DrainSession* session;
    LatchIoWaiter* waiter;
};

enum class BatchOutcome {
    Empty,       // nothing ready
    Partial,     // delivered fewer than a full batch: the queue is drained for now
    Full,        // delivered a full batch: there may be more
    Unavailable, // Redis unreachable or failed mid-way: the jobs stay staged
    Refused,     // Redis refused the unit (OOM, ...): the jobs stay staged
    Interrupted, // shutdown requested during Redis I/O
};

struct BatchResult {
    BatchOutcome outcome;
    bool reconcile_needed;  // part of a unit may be in Redis: reconcile before the next batch
    char message[jobbuf::redis::kMessageLen];
};

// Runs one batch for queue q in its own transaction. Postgres errors propagate (ereport).
BatchResult drain_one_batch(DrainContext* ctx, const ActiveQueue* q);

// Claims one group of queue q (jobbuf_claim) and pushes one message for it, in one transaction;
// Full when a group was pushed, Empty when nothing could be claimed.
BatchResult drain_one_group(DrainContext* ctx, const ActiveQueue* q);

// Deletes the jobs that the marker names (Redis took them, Postgres did not record it), in its
// own transaction. Returns the session's report (Ok when done).
jobbuf::redis::SessionReport reconcile_delivered(DrainContext* ctx);

// Loads the queues the worker pushes (not paused, target list/stream/sidekiq, delivery each) into
// an array allocated in cxt. Returns -1 when the extension is not installed in this database.
int load_active_queues(MemoryContext cxt, ActiveQueue** queues);

// The marker key and Sidekiq jid salt, unique to this cluster and database.
void delivery_identity(char* marker_key, size_t len, uint32* jid_salt);
