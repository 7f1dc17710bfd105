// Postgres regime: the worker's census of its queues (what jobbuf_stats() and
// jobbuf_queue_metrics() read, so that they never count jobs themselves) and its last minute of
// deliveries per queue: how many, and how long each job waited, from greatest(staged_at, run_at)
// to the moment Redis took it, kept in a ring of 12 five-second slots of a log-scale histogram
// (96 buckets, 20% wide: a percentile is exact to about ±10%). The census runs
// jobbuf.take_census() in a transaction of its own at most every jobbuf.poll_interval (1 s at
// most), and no more often than every ten times its last duration, so a large backlog costs the
// worker at most a tenth of its time.
#pragma once
#include "pg_includes.h"

#include "redis/job_types.h"

// Notes the jobs of a batch that Redis took (results Delivered), at epoch second now.
void note_delivered_jobs(const char* queue, const jobbuf::redis::StagedJob* jobs,
                         const jobbuf::redis::JobResult* results, uint64 count, double now);

// Notes count deliveries without their times (group messages).
void note_delivered_count(const char* queue, int64 count, double now);

// Takes the census when it is due and the installed SQL has it; outside any transaction.
void take_census_if_due(void);

// Milliseconds until the census is due (0: now).
long census_due_in_ms(void);
