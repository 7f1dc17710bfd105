// Postgres regime: the queues a pass visits. A queue is pending (queue_progress.h) when a commit
// named it, when a full pass found it holding jobs, or when its last batch was full; this list
// holds the pending ones, so that a pass costs O(queues with work), not a walk over every queue of
// the list (10,000 of them for one commit). Visited in round-robin order from a start that moves on
// by one each pass.
#pragma once
#include "pg_includes.h"

#include "drain/active_queues.h"

// The queue list was (re)loaded: nothing listed; the queues whose progress is pending are listed
// again (one walk over the new list, as its load was).
void pending_queues_new_list(const ActiveQueue* queues, int nqueues);

// A Full or Head pass restarted every cursor (nothing is pending any more): nothing listed.
void pending_queues_clear(void);

// Marks q (of the list last given to pending_queues_new_list) pending and lists it.
void want_queue(const ActiveQueue* q);

// The same for a queue named by a query: ignored when it is not in the list (paused, say).
void want_queue_named(const char* queue);

// The listed queues still pending, as indexes into the list, in round-robin order from start;
// those no longer pending leave the list. Valid until the next call.
int pending_queues_in_order(uint32 start, const int** order);
