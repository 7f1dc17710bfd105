// Postgres regime: one batch of the drain for a queue with delivery 'each': take the oldest ready
// jobs, push them as one Redis unit with the marker, delete them in the same transaction.
#pragma once
#include "pg_includes.h"

#include "active_queues.h"
#include "batch_result.h"

// Runs one batch for queue q in its own transaction, taking only jobs with id > *after_id, and
// on delivery sets *after_id to the last id taken. Postgres errors propagate (ereport).
//
// The cursor lets the consecutive batches of a backlog skip the index entries of the jobs the
// previous batches deleted: they stay in the index until vacuum, and while any snapshot older
// than the deletes exists (a long transaction, an ANALYZE) no scan may mark them dead, so a scan
// from the start would walk all of them, every batch. The caller starts each round at 0, and
// before ending a round rescans from 0 once, for jobs that committed out of id order.
BatchResult drain_one_batch(DrainContext* ctx, const ActiveQueue* q, int64* after_id);
