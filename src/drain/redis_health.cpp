// Postgres regime: Redis backoff and outage reporting for the drain worker (see redis_health.h).
#include "pg_includes.h"

#include "config/settings.h"
#include "config/shared_state.h"
#include "drain/redis_health.h"
#include "status/problem_log.h"

extern "C" {
#include "utils/timestamp.h"
}

namespace {

int backoff_ms = 0;
int backoff_cap_ms = 0;
TimestampTz next_attempt = 0;
bool reported_down = false;

}  // namespace

void redis_failed(jobbuf::redis::DrainSession* session, const char* message)
{
    backoff_ms = backoff_ms == 0 ? kMinBackoffMs : Min(backoff_ms * 2, kMaxBackoffMs);
    backoff_ms = Min(backoff_ms, Max(jobbuf_poll_interval, kMinBackoffMs) * 10);
    if (backoff_cap_ms > 0)
        backoff_ms = Min(backoff_ms, Max(backoff_cap_ms, kMinBackoffMs));
    next_attempt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), backoff_ms);
    reported_down = true;
    shared_state_set_redis_connected(jobbuf::redis::drain_session_connected(session));
    report_problem(ProblemKind::Redis, message);
}

void redis_succeeded(jobbuf::redis::DrainSession* session)
{
    backoff_ms = 0;
    if (reported_down) {
        reported_down = false;
        char where[256];
        jobbuf::redis::drain_session_describe(session, where, sizeof(where));
        char message[320];
        snprintf(message, sizeof(message), "Redis at %s accepts jobs again", where);
        report_recovered(ProblemKind::Redis, message);
    }
    shared_state_set_redis_connected(true);
}

TimestampTz next_redis_attempt(void)
{
    return next_attempt;
}

void cap_redis_backoff(int max_ms)
{
    backoff_cap_ms = max_ms;
}

void delay_redis_attempts(int delay_ms)
{
    if (delay_ms == 0) {
        next_attempt = 0;
        backoff_ms = 0;
        return;
    }
    next_attempt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), delay_ms);
}

int redis_backoff_ms(void)
{
    return Max(backoff_ms, kMinBackoffMs);
}
