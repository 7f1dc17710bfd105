// Postgres regime: the drain worker's transaction brackets (one transaction per batch, with SPI
// and a snapshot, and pgstat reporting so autovacuum sees the deletes) and its kept SPI plans.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "executor/spi.h"
}

void begin_worker_transaction(const char* activity);
void commit_worker_transaction(void);
void abort_worker_transaction(void);

// SPI_prepare + SPI_keepplan, raising an error when the statement does not prepare.
SPIPlanPtr prepare_kept(const char* sql, int nargs, Oid* types);

// Wall-clock time as Unix epoch seconds (Sidekiq's enqueued_at).
double now_epoch_seconds(void);
