// Postgres regime: the worker's census of its queues (what jobbuf_stats() and
// jobbuf_queue_metrics() read, so that they never count jobs themselves) and its last minute of
// deliveries per queue: how many, and how long each job waited, from greatest(staged_at, run_at)
// to the moment Redis took it, kept in a ring of 12 five-second periods of a log-scale histogram
// (96 buckets, 20% wide: a percentile is exact to about ±10%). A census walks jobbuf.jobs in
// id order, one bounded step (jobbuf.census_step) in a transaction of its own between two of the
// worker's rounds, adds the counts up per queue in memory and publishes them
// (jobbuf.publish_census) with the step that reaches the end. It starts at most every
// jobbuf.poll_interval (1 s at most), and no sooner than ten times the time its last one spent in
// its steps, so a large backlog costs the worker at most a tenth of its time.
#pragma once
#include "pg_includes.h"

#include "redis/job_types.h"

// Notes the jobs of a batch that Redis took (results Delivered), at epoch second now.
void note_delivered_jobs(const char* queue, const jobbuf::redis::StagedJob* jobs,
                         const jobbuf::redis::JobResult* results, uint64 count, double now);

// Notes count deliveries without their times (group messages).
void note_delivered_count(const char* queue, int64 count, double now);

// Takes the next step of the census when one is under way or due and the installed SQL has
// it; outside any transaction.
void take_census_if_due(void);

// Milliseconds until the census's next step is due (0: now, as while one is under way).
long census_due_in_ms(void);
