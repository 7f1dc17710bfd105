// Postgres regime: claims that expired on a queue the worker delivers job by job (delivery
// 'each'). Nothing claims such a queue's jobs any more, and the drain takes only unclaimed jobs,
// but claims can still be there: jobbuf 1.0 let consumers claim jobs of any queue, and a queue
// switched from delivery 'group' to 'each' keeps the groups in flight until their leases end.
// Once a lease expired, its jobs are released to the drain, as a claim would take them again.
#pragma once
#include "pg_includes.h"

#include "delivery/batch_result.h"
#include "drain/active_queues.h"
#include "drain/queue_progress.h"

// In its own transaction, up to limit jobs of queue q whose lease expired: those at max_attempts
// go to jobbuf.dead (jobbuf.bury_abandoned), the others are released (group_id and lease_until
// NULL, the lost lease counted as an attempt, last_error 'lease expired'), except a job whose
// unique key a waiting job (or a newer released one) holds, which is dropped: the other does
// its work. Rewinds progress->after_id below the lowest job released. False, with
// result->outcome Locked, when jobbuf's tables are locked. Postgres errors propagate.
bool release_expired_claims(const ActiveQueue* q, int limit, QueueProgress* progress, BatchResult* result);
