// Postgres regime: the drain worker's view of Redis health: capped exponential backoff after a
// failure, the one WARNING when Redis becomes unavailable and the one LOG when it accepts jobs
// again (problem_log.h), and redis_connected in shared memory for jobbuf_worker_status().
#pragma once
#include "pg_includes.h"

#include "redis/drain_session.h"

constexpr int kMinBackoffMs = 100;
constexpr int kMaxBackoffMs = 30 * 1000;

// Schedules the next Redis attempt after a failure (doubling the backoff up to 30 s, and to ten
// poll intervals) and logs the problem once.
void redis_failed(jobbuf::redis::DrainSession* session, const char* message);

// Redis took a unit: the backoff ends, and a reported outage is logged as over.
void redis_succeeded(jobbuf::redis::DrainSession* session);

// No Redis attempt before this time (0: now).
TimestampTz next_redis_attempt(void);

// While the worker holds the delivery lease, the backoff after a failure stays at most max_ms (0:
// no cap), so that it refreshes the lease before it could lapse however long Redis was away.
void cap_redis_backoff(int max_ms);

// Holds Redis attempts back for delay_ms (0: allows one now and forgets the backoff).
void delay_redis_attempts(int delay_ms);

// The current backoff, at least kMinBackoffMs: how long to sleep after a failure.
int redis_backoff_ms(void);
