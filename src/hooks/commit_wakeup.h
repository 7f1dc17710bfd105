// Postgres regime: wakes the drain worker when a transaction that staged jobs commits, and tells
// it which queues got new jobs, the lowest job id committed, and whether the queue definitions
// changed. Both sides of that exchange live here.
#pragma once
#include "pg_includes.h"

#include "config/shared_state.h"

// The wake hash of a queue: 64 bits of a hash of its name, what a commit names the queue by.
uint64 queue_wake_hash(const char* queue);

// The wake bit of a queue: one of 64, from its wake hash (queues may share a bit; a shared bit
// only costs the worker a look at a queue that has nothing new). The worker goes by the bits
// only when more queues were staged into than the slot names exactly (kWokenQueues).
uint64 queue_wake_bit(const char* queue);

// Marks the current transaction as having staged job id into queue (the jobs trigger, jobbuf_stage).
void note_jobs_staged(const char* queue, int64 id);

// Marks the current transaction as having changed jobbuf.queues (called by the queues trigger):
// at commit the worker reloads its queue list and looks at every queue.
void note_queues_changed(void);

// Marks the current transaction as having changed jobbuf.schedules (its trigger): at commit the
// worker reads its next due tick again.
void note_schedules_changed(void);

// The worker's side: what commits published since the last call, taken atomically.
struct StagedWork {
    uint64 queue_bits;  // wake bits of the queues staged into (all set: look at every queue)
    int64 lowest_id;    // the lowest job id committed; PG_INT64_MAX when none
    bool exact;         // the wake hashes below name every queue staged into (the bits may be ignored)
    int count;
    uint64 hashes[kWokenQueues];
    int64 lowest_ids[kWokenQueues];  // per named queue: the lowest id its commits staged
};
StagedWork take_staged_work(void);

// Registers the transaction callback; called once per process from _PG_init.
void register_commit_wakeup(void);
