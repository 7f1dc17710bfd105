// Postgres regime: the brackets every delivery attempt (a batch, a group, a release of expired
// claims) opens with: its transaction with jobbuf's tables locked, and the check, once the jobs
// are taken, that the queue list it worked from is still current.
#pragma once
#include "pg_includes.h"

#include "delivery/batch_result.h"

// Begins the transaction of a delivery attempt and locks jobbuf's tables. False, with the
// transaction aborted and result->outcome Locked, when the tables are locked (DDL).
bool begin_delivery_transaction(const char* activity, BatchResult* result);

// After the jobs were taken (or a group claimed), before anything reaches Redis: false, with the
// transaction aborted and result->outcome Stale, when jobbuf.queues changed since the queue list
// was read (active_queues_changed). Asked after every snapshot the take used (SPI statements take
// their own), so a take that could see a job staged after jobbuf_pause returned sees the pause.
bool queue_list_still_current(BatchResult* result);
