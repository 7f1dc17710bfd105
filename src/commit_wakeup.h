// Postgres regime: wakes the drain worker when a transaction that staged jobs commits, and tells
// it which queues got new jobs, the lowest job id committed, and whether the queue definitions
// changed. Both sides of that exchange live here.
#pragma once
#include "pg_includes.h"

// The wake bit of a queue: one of 64, from a hash of its name (queues may share a bit; a shared
// bit only costs the worker a look at a queue that has nothing new).
uint64 queue_wake_bit(const char* queue);

// Marks the current transaction as having staged job id into queue (the jobs trigger, jobbuf_stage).
void note_jobs_staged(const char* queue, int64 id);

// Marks the current transaction as having changed jobbuf.queues (called by the queues trigger):
// at commit the worker reloads its queue list and looks at every queue.
void note_queues_changed(void);

// The worker's side: what commits published since the last call, taken atomically.
struct StagedWork {
    uint64 queue_bits;  // wake bits of the queues staged into (all set: look at every queue)
    int64 lowest_id;    // the lowest job id committed; PG_INT64_MAX when none
};
StagedWork take_staged_work(void);

// Registers the transaction callback; called once per process from _PG_init.
void register_commit_wakeup(void);
