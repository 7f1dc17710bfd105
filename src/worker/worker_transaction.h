// Postgres regime: the drain worker's transaction brackets (one transaction per batch, with SPI
// and a snapshot, and pgstat reporting so autovacuum sees the deletes) and its kept SPI plans.
#pragma once
#include "pg_includes.h"

#include "support/kept_plan.h"

extern "C" {
#include "executor/spi.h"
}

void begin_worker_transaction(const char* activity);
void commit_worker_transaction(void);
void abort_worker_transaction(void);

// Takes, without waiting, the locks a batch needs on jobbuf's tables (queues, jobs, queue_stats,
// dead, delivery_counter), all up front. False when one is held in a conflicting mode (DROP EXTENSION, TRUNCATE,
// LOCK TABLE): the caller then ends its transaction and skips the batch, so the worker never
// waits holding some of them — the deadlock it would otherwise risk with DROP EXTENSION.
bool lock_jobbuf_tables(void);

// SPI_execute_plan of a kept plan, raising an error that names what failed unless it returns
// expected (SPI_OK_SELECT, SPI_OK_UPDATE, ...). The rows are in SPI_tuptable / SPI_processed.
void execute_kept(SPIPlanPtr plan, Datum* values, const char* nulls, bool read_only, int expected, const char* what);

// Wall-clock time as Unix epoch seconds (Sidekiq's enqueued_at).
double now_epoch_seconds(void);
