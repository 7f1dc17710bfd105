// Postgres regime: the token bucket of max_rate (see rate_limit.h). The buckets live in a table
// of their own, by queue name, for the worker's life: the cursors' table (queue_progress.h) is
// emptied at every head pass, and a bucket made full again there would let a burst through.
#include "pg_includes.h"

#include "config/settings.h"
#include "delivery/rate_limit.h"

extern "C" {
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

namespace {

struct RateBucket {
    char queue[NAMEDATALEN];  // hash key
    double tokens;            // the jobs it allows now
    TimestampTz filled_at;    // when it was last filled
};

HTAB* buckets = nullptr;

RateBucket* bucket_of(const ActiveQueue* q, double size)
{
    if (buckets == nullptr) {
        HASHCTL ctl;
        memset(&ctl, 0, sizeof(ctl));
        ctl.keysize = NAMEDATALEN;
        ctl.entrysize = sizeof(RateBucket);
        ctl.hcxt = TopMemoryContext;
        buckets = hash_create("jobbuf rate buckets", 64, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
    }
    bool found = false;
    auto* bucket = static_cast<RateBucket*>(hash_search(buckets, q->name, HASH_ENTER, &found));
    if (!found) {
        bucket->tokens = size;  // a queue met for the first time starts with a full bucket
        bucket->filled_at = GetCurrentTimestamp();
    }
    return bucket;
}

// The bucket's size: a batch's worth, at most max_rate (a rate below one job a second holds one).
double bucket_size(const ActiveQueue* q, double rate)
{
    double batch = q->batch_size > 0 ? q->batch_size : jobbuf_batch_size;
    return Min(batch, Max(1.0, rate));
}

}  // namespace

// Fills q's bucket and waits (RateLimited) until it holds at least needed jobs (at most its
// size); then lowers *limit to what it holds.
static bool rate_room_of(const ActiveQueue* q, double needed, int* limit, BatchResult* result)
{
    double rate = jobbuf::redis::queue_target_max_rate(q->target);
    if (rate <= 0)
        return true;
    double size = bucket_size(q, rate);
    RateBucket* bucket = bucket_of(q, size);
    TimestampTz now = GetCurrentTimestamp();
    if (now > bucket->filled_at)
        bucket->tokens = Min(size, bucket->tokens + rate * static_cast<double>(now - bucket->filled_at) / 1e6);
    bucket->filled_at = now;
    needed = Max(1.0, Min(needed, size));
    if (bucket->tokens < needed) {
        result->outcome = BatchOutcome::RateLimited;
        result->wait_ms = static_cast<long>((needed - bucket->tokens) / rate * 1000.0) + 1;
        return false;
    }
    *limit = static_cast<int>(Min(static_cast<double>(*limit), bucket->tokens));
    return true;
}

bool rate_room_for(const ActiveQueue* q, int* limit, BatchResult* result)
{
    return rate_room_of(q, 1.0, limit, result);
}

bool rate_room_for_group(const ActiveQueue* q, int* size, BatchResult* result)
{
    return rate_room_of(q, *size, size, result);
}

void rate_spent(const ActiveQueue* q, int64 pushed)
{
    double rate = jobbuf::redis::queue_target_max_rate(q->target);
    if (rate > 0)
        bucket_of(q, bucket_size(q, rate))->tokens -= static_cast<double>(pushed);
}
