// Postgres regime: one batch of the drain for a queue with delivery 'each': take the oldest ready
// jobs, push them as one Redis unit with the marker, delete them in the same transaction.
#pragma once
#include "pg_includes.h"

#include "active_queues.h"
#include "batch_result.h"

// Runs one batch for queue q in its own transaction. Postgres errors propagate (ereport).
BatchResult drain_one_batch(DrainContext* ctx, const ActiveQueue* q);
