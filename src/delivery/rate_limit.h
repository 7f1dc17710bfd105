// Postgres regime: the queue option max_rate as a batch sees it (SPEC 1.3, "Flow control at the
// drain": Rate): a token bucket per queue holding at most min(batch size, max(1, max_rate)) jobs,
// filled at max_rate per second, so that over any t seconds at most max_rate × t + that many are
// pushed.
#pragma once
#include "pg_includes.h"

#include "delivery/batch_result.h"
#include "drain/active_queues.h"

// Fills q's bucket and lowers *limit to the jobs it holds. False when it holds less than one job,
// with result->outcome RateLimited and *wait_ms until it does; true at once without max_rate.
bool rate_room_for(const ActiveQueue* q, int* limit, BatchResult* result);

// The same for a group of *size jobs (delivery "group"): false until the bucket holds a whole
// group (or as many as it can hold), so that groups keep their size instead of shrinking to what
// trickles in between two looks.
bool rate_room_for_group(const ActiveQueue* q, int* size, BatchResult* result);

// Takes the jobs a batch pushed out of q's bucket.
void rate_spent(const ActiveQueue* q, int64 pushed);
