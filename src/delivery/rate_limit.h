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

// Takes the jobs a batch pushed out of q's bucket.
void rate_spent(const ActiveQueue* q, int64 pushed);
