// Postgres regime: the drain's take for a queue with fair_by: "partition_key" (docs/flow.md,
// "Fairness"). A batch takes the oldest ready job of each partition in turn (deficit round robin
// with a quantum of one job): a first round over the partitions, in key order from where the
// last batch's first round stopped, then further rounds over the partitions that gave a job,
// until the batch is full. Jobs without a partition key form one partition, served first in
// each round. Within a partition jobs go in id order.
//
// The partitions come from jobs_partition_waiting (queue, partition_key, id): one index descent
// finds the next partition, one more its next job, so the cost of a batch follows the jobs it
// takes and the partitions it visits, never the number of partitions or of jobs waiting. A
// partition the last batch left with more jobs keeps a cursor (queue_progress.h), as the queue
// itself does without fair_by, and its next walk starts there instead of at its head; the search
// for the next partition stops short of it and takes it up at its cursor, never stepping over the
// entries before the cursor (once marked dead, an index scan skips them one by one). Jobs without
// a partition key are found by walking jobs_waiting from the queue's cursor, past at most
// batch-size keyed jobs per batch.
#pragma once
#include "pg_includes.h"

#include "delivery/taken_batch.h"
#include "drain/queue_progress.h"
#include "redis/target_handle.h"

// Takes up to limit jobs of queue into *taken as described above, with the same bounds and row
// rules as take_jobs_directly (job_taker.h); taken->cursor_after and taken->partitions say where
// the walks stand once the batch commits. False, with nothing done, when the table or one of the
// two indexes is not as the extension created it (the caller then takes in id order).
bool take_jobs_fairly(const char* queue, const jobbuf::redis::TargetTraits& target, int limit,
                      const QueueProgress* progress, TakeBounds bounds, TakenBatch* taken);

// The batch that took *taken committed: the queue's cursor and its partitions' walks move on.
void fair_take_committed(QueueProgress* progress, const TakenBatch& taken);
