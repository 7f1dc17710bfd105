// Postgres regime: the drain's take without SQL. It walks jobs_waiting from the queue's cursor
// and deletes each ready job by its tuple id with the table AM, as the worker's batch statement
// (drain_batch.cpp) would: the same rows in the same order, a job locked or changed by another
// transaction skipped as FOR UPDATE SKIP LOCKED skips it, the same projection for Redis. What it
// leaves out is the executor: no plan start-up per batch, no separate row-lock step (a WAL
// record per job) and no second btree descent per id to find the row again for the DELETE.
//
// Taken only while jobbuf.jobs and jobs_waiting are as the extension created them (see
// jobs_table_shape.h): a table with an owner's DELETE trigger, a rule or a foreign key pointing
// at it gets the SQL statement, which runs them.
#pragma once
#include "pg_includes.h"

#include "delivery/taken_batch.h"

// Takes up to limit ready jobs of queue with id > after_id (any run_at when the target carries
// run_at: Sidekiq holds scheduled jobs itself), without the target's own payload keys, into *taken, in id order, and no more than bounds allow: the take
// stops before a job whose text would not fit (it stays staged for the next batch); a job whose
// text is longer than bounds.job_bytes is taken without rendering it (known_too_large), measured
// by walking its jsonb when its size says it could be. False, with nothing done, when the
// table is not in the shape described above.
bool take_jobs_directly(const char* queue, const jobbuf::redis::TargetTraits& target, int limit, int64 after_id,
                        TakeBounds bounds, TakenBatch* taken);

// True when index is jobs_waiting as created: a valid btree on (queue, owner, id) WHERE group_id IS NULL.
bool waiting_index_is_pristine(Relation index);
