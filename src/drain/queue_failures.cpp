// Postgres regime: the per-queue error backoff and its log lines (see queue_failures.h), kept in
// a small hash table of the failing queues in the worker's TopMemoryContext.
#include "pg_includes.h"

#include "config/shared_state.h"
#include "drain/queue_failures.h"
#include "drain/redis_health.h"
#include "status/problem_log.h"
#include "support/name_hash.h"

extern "C" {
#include "utils/hsearch.h"
}

namespace {

constexpr int kFirstBackoffMs = 1000;
constexpr int kRepeatAfterMs = 60 * 1000;  // a changed text of an ongoing problem, at most this often

struct QueueFailure {
    char queue[NAMEDATALEN];  // hash key
    char text[kStatusErrorLen];
    TimestampTz logged_at;
    TimestampTz retry_at;
    int backoff_ms;
};

HTAB* failures = nullptr;

QueueFailure* find_failure(const char* queue)
{
    if (failures == nullptr)
        return nullptr;
    return static_cast<QueueFailure*>(hash_search(failures, queue, HASH_FIND, nullptr));
}

// Whether another queue is failing with this text: an error of the whole database (not of one
// queue) is then said once, not once per queue.
bool said_for_another_queue(const char* queue, const char* message)
{
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, failures);
    while (auto* failure = static_cast<QueueFailure*>(hash_seq_search(&scan)))
        if (strcmp(failure->queue, queue) != 0 && strncmp(failure->text, message, kStatusErrorLen - 1) == 0) {
            hash_seq_term(&scan);
            return true;
        }
    return false;
}

}  // namespace

void queue_failed(const char* queue, const char* message)
{
    if (failures == nullptr)
        failures = create_name_hash("jobbuf failing queues", sizeof(QueueFailure), 8);
    bool found = false;
    auto* failure = static_cast<QueueFailure*>(hash_search(failures, queue, HASH_ENTER, &found));
    TimestampTz now = GetCurrentTimestamp();
    bool changed = found && strncmp(failure->text, message, kStatusErrorLen - 1) != 0;
    if (!found || (changed && TimestampDifferenceExceeds(failure->logged_at, now, kRepeatAfterMs))) {
        if (!said_for_another_queue(queue, message))
            ereport(WARNING, (errmsg("jobbuf: queue \"%s\" is not delivered: %s", queue, message),
                              errdetail("Its jobs stay staged and the worker tries it again with backoff; the "
                                        "other queues are delivered meanwhile.")));
        strlcpy(failure->text, message, sizeof(failure->text));
        failure->logged_at = now;
    }
    failure->backoff_ms = found ? Min(failure->backoff_ms * 2, kMaxBackoffMs) : kFirstBackoffMs;
    failure->retry_at = TimestampTzPlusMilliseconds(now, failure->backoff_ms);
    shared_state_set_error(message);
}

void queue_succeeded(const char* queue)
{
    if (find_failure(queue) == nullptr)
        return;
    hash_search(failures, queue, HASH_REMOVE, nullptr);
    ereport(LOG, (errmsg("jobbuf: queue \"%s\" is delivered again", queue)));
    show_lasting_problem();
}

bool queue_backing_off(const char* queue, TimestampTz now)
{
    QueueFailure* failure = find_failure(queue);
    return failure != nullptr && now < failure->retry_at;
}

TimestampTz next_queue_retry(TimestampTz now)
{
    if (failures == nullptr)
        return 0;
    TimestampTz earliest = 0;
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, failures);
    while (auto* failure = static_cast<QueueFailure*>(hash_seq_search(&scan)))
        if (failure->retry_at > now && (earliest == 0 || failure->retry_at < earliest))
            earliest = failure->retry_at;
    return earliest;
}

void retry_failing_queues_now(void)
{
    if (failures == nullptr)
        return;
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, failures);
    while (auto* failure = static_cast<QueueFailure*>(hash_seq_search(&scan)))
        failure->retry_at = 0;
}
