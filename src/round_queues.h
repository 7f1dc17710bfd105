// Postgres regime: the drain worker's per-queue state within one drain round: whether the queue
// still needs a batch in this round, and the id after which its next batch starts (see
// drain_one_batch in drain_batch.h for why batches continue from a cursor).
#pragma once
#include "pg_includes.h"

struct RoundQueue {
    char queue[NAMEDATALEN];  // hash key
    int64 after_id;           // 0: the next batch starts at the head of the queue
    bool pending;             // the queue needs (another) batch in this round
};

// Starts a round: forgets every queue's state.
void reset_round_queues(void);

// The state of a queue in the current round, created on first use with after_id 0 and the given
// pending flag; valid until the next reset.
RoundQueue* round_queue(const char* queue, bool pending_if_new);
