// Postgres regime: what the worker records about each delivered batch: the per-queue counters
// in jobbuf.queue_stats (same transaction as the deletes, so exact) and the shared-memory
// counters of jobbuf_worker_status().
#pragma once
#include "pg_includes.h"

// Inside the batch's transaction (SPI connected).
void record_batch(const char* queue, int64 delivered, int64 failed, const char* error);

// After the commit.
void publish_batch_counters(int64 delivered);
