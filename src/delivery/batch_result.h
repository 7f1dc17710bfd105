// Postgres regime: what one delivery attempt (a batch of jobs, or one group) tells the worker
// loop, and the Redis-side context it runs with.
#pragma once
#include "pg_includes.h"

#include "redis/drain_session.h"
#include "worker/latch_io_waiter.h"

struct DrainContext {
    jobbuf::redis::DrainSession* session;
    LatchIoWaiter* waiter;
    uint64 pass;  // the drain worker's pass (depth_cap.h lists the capped queues of each)
};

enum class BatchOutcome {
    Empty,        // nothing ready
    Locked,       // jobbuf's tables are locked (DDL): nothing done, try again at the next round
    Stale,        // jobbuf.queues changed since the queue list was read: nothing done, reload it
    Partial,      // delivered fewer than a full batch: the queue is drained for now
    Full,         // delivered a full batch: there may be more
    Unavailable,  // Redis unreachable or failed mid-way: the jobs stay staged
    Refused,      // Redis refused the unit (OOM, ...): the jobs stay staged
    MemoryFull,   // the Redis node is at jobbuf.redis_memory_limit: nothing taken, the jobs wait
    DepthCapped,  // the queue's jobs in Redis reach its max_in_redis: nothing taken, the jobs wait
    RateLimited,  // the queue's max_rate allows no job now: nothing taken, for wait_ms
    Interrupted,  // shutdown requested during Redis I/O
};

struct BatchResult {
    BatchOutcome outcome;
    bool reconcile_needed;  // part of a unit may be in Redis: reconcile before the next batch
    int64 take_us;          // time spent in the statement that takes the batch
    long wait_ms;           // RateLimited: until the queue's rate allows a job
    bool depth_read;        // DepthCapped: depth is what was read now (false: the last read stands)
    long long depth;        // the queue's depth in Redis, when depth_read
    char message[jobbuf::redis::kMessageLen];
};

inline void set_batch_message(BatchResult* result, const char* text)
{
    strlcpy(result->message, text, sizeof(result->message));
}

inline BatchOutcome outcome_of(jobbuf::redis::SessionReport::Status status)
{
    using Status = jobbuf::redis::SessionReport::Status;
    switch (status) {
        case Status::Interrupted:
            return BatchOutcome::Interrupted;
        case Status::Refused:
            return BatchOutcome::Refused;
        default:
            return BatchOutcome::Unavailable;
    }
}
