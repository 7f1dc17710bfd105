// Postgres regime: the drain worker's per-queue cursors for one drain round: the id after which
// the next batch of a queue starts (see drain_one_batch in drain_batch.h for why).
#pragma once
#include "pg_includes.h"

// Forgets every cursor: each queue's next batch starts at the head of the queue.
void reset_round_cursors(void);

// The cursor of a queue (0 when the round has not touched it yet); valid until the next reset.
int64* round_cursor(const char* queue);
