// Postgres regime: one batch of the drain for a queue with delivery 'each': take the oldest ready
// jobs, push them as one Redis unit with the marker, delete them in the same transaction.
#pragma once
#include "pg_includes.h"

#include "delivery/batch_result.h"
#include "drain/active_queues.h"
#include "drain/queue_progress.h"

// Runs one batch for queue q in its own transaction, taking only jobs with id > progress->after_id;
// on delivery sets after_id to the last id taken, and notes the lowest id it left waiting in
// progress->lowest_passed_over. Postgres errors propagate (ereport).
//
// The cursor lets consecutive batches skip the index entries of the jobs earlier batches deleted
// (see queue_progress.h).
BatchResult drain_one_batch(DrainContext* ctx, const ActiveQueue* q, QueueProgress* progress);
