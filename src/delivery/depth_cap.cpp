// Postgres regime: the depth cap of a batch (see depth_cap.h).
#include "pg_includes.h"

#include "delivery/depth_cap.h"
#include "support/kept_plan.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

using jobbuf::redis::SessionReport;

namespace {

SPIPlanPtr claimed_plan = nullptr;

// A read depth counts for this long (plus the jobs pushed since): consumers only lower it, and
// what other writers add meanwhile (Sidekiq's scheduler, BullMQ's promotions) is seen this late.
constexpr long kReadingLifetimeMs = kDepthRecheckMs;
// A reading gone stale in the middle of a pass is read again with the next this many capped
// queues of the pass, in the same round trip.
constexpr int kLookahead = 1000;

// The depth of what capped queues deliver into, by the keys it reads (queue_target_depth_identity):
// queues that share a key share one depth.
struct DepthReading {
    uint64 identity;      // hash key
    TimestampTz read_at;  // 0: not read
    long long depth;      // as read then, plus the jobs pushed since
    uint64 listed;        // the read call that listed it last (each key is read once per call)
    uint64 unread_pass;   // a read in this pass listed it and could not read it (its master failed,
                          // a redirection, an error reply): its queue's own read says why
};
HTAB* readings = nullptr;
uint64 read_calls = 0;

// The capped queues of the current pass, in the order it tries them.
struct Candidate {
    const jobbuf::redis::QueueTarget* target;
    QueueProgress* progress;
};
MemoryContext pass_cxt = nullptr;
Candidate* candidates = nullptr;
int ncandidates = 0;
uint64 candidates_pass = 0;

DepthReading* reading_of(uint64 identity, bool create)
{
    if (readings == nullptr) {
        if (!create)
            return nullptr;
        HASHCTL info;
        memset(&info, 0, sizeof(info));
        info.keysize = sizeof(uint64);
        info.entrysize = sizeof(DepthReading);
        info.hcxt = TopMemoryContext;
        readings = hash_create("jobbuf depth readings", 64, &info, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
    }
    bool found = false;
    auto* reading =
        static_cast<DepthReading*>(hash_search(readings, &identity, create ? HASH_ENTER : HASH_FIND, &found));
    if (reading != nullptr && !found) {
        reading->read_at = 0;
        reading->depth = 0;
        reading->listed = 0;
        reading->unread_pass = 0;
    }
    return reading;
}

bool fresh(const DepthReading* reading, TimestampTz now)
{
    return reading != nullptr && reading->read_at != 0 &&
           !TimestampDifferenceExceeds(reading->read_at, now, static_cast<int>(kReadingLifetimeMs));
}

// Reads, in one round trip (one per Cluster master), the depths of candidates [from, upto) that
// are due (no recheck pending) and not freshly read: each key once.
SessionReport read_candidates(DrainContext* ctx, int from, int upto, TimestampTz now)
{
    int room = Max(upto - from, 1);
    auto* targets = static_cast<const jobbuf::redis::QueueTarget**>(palloc(sizeof(void*) * room));
    auto* listed = static_cast<DepthReading**>(palloc(sizeof(void*) * room));
    uint64 call = ++read_calls;
    int n = 0;
    for (int i = from; i < upto; i++) {
        const Candidate& c = candidates[i];
        if (now < c.progress->capped_until)
            continue;
        DepthReading* reading = reading_of(jobbuf::redis::queue_target_depth_identity(c.target), true);
        if (fresh(reading, now) || reading->listed == call)
            continue;
        reading->listed = call;
        targets[n] = c.target;
        listed[n++] = reading;
    }
    SessionReport report;
    if (n > 0) {
        auto* depths = static_cast<long long*>(palloc(sizeof(long long) * n));
        auto* read = static_cast<bool*>(palloc(sizeof(bool) * n));
        report = jobbuf::redis::drain_session_depths(ctx->session, *ctx->waiter, targets, static_cast<std::size_t>(n),
                                                     depths, read);
        for (int i = 0; i < n && report.status == SessionReport::Status::Ok; i++)
            if (read[i]) {
                listed[i]->depth = depths[i];
                listed[i]->read_at = now;
            } else {
                listed[i]->unread_pass = ctx->pass;
            }
        pfree(depths);
        pfree(read);
    }
    pfree(targets);
    pfree(listed);
    return report;
}

// Back in the Postgres regime after a read: false, with the batch's outcome, when it failed.
bool read_succeeded(DrainContext* ctx, const SessionReport& report, BatchResult* result)
{
    ctx->waiter->raise_pending();
    if (report.status == SessionReport::Status::Ok)
        return true;
    result->outcome = outcome_of(report.status);
    set_batch_message(result, report.message);
    return false;
}

// Whether the cap holds at depth (read at now): otherwise *limit is lowered to the room left.
bool room_at_depth(long long cap, long long depth, TimestampTz now, QueueProgress* progress, int* limit,
                   BatchResult* result)
{
    result->depth_read = true;
    result->depth = depth;
    if (depth >= cap) {
        progress->capped_until = TimestampTzPlusMilliseconds(now, kDepthRecheckMs);
        result->outcome = BatchOutcome::DepthCapped;
        return false;
    }
    progress->capped_until = 0;
    *limit = static_cast<int>(Min(static_cast<long long>(*limit), cap - depth));
    return true;
}

}  // namespace

bool depth_room_for(DrainContext* ctx, const ActiveQueue* q, QueueProgress* progress, int* limit, BatchResult* result)
{
    long long cap = jobbuf::redis::queue_target_max_in_redis(q->target);
    if (cap <= 0)
        return true;
    TimestampTz now = GetCurrentTimestamp();
    if (now < progress->capped_until) {
        result->outcome = BatchOutcome::DepthCapped;
        return false;
    }
    uint64 identity = jobbuf::redis::queue_target_depth_identity(q->target);
    DepthReading* reading = reading_of(identity, false);
    if (!fresh(reading, now) && progress->depth_pass == ctx->pass && candidates_pass == ctx->pass &&
        (reading == nullptr || reading->unread_pass != ctx->pass)) {
        // Stale in the middle of the pass: again, with the capped queues the pass tries next.
        int from = progress->depth_candidate;
        if (!read_succeeded(ctx, read_candidates(ctx, from, Min(from + kLookahead, ncandidates), now), result))
            return false;
        reading = reading_of(identity, false);
    }
    if (!fresh(reading, now)) {
        // Not read with the others (a queue the pass did not list, a redirection, an error reply):
        // its own round trip, which follows redirections and reports what fails. A reply that
        // is not a depth (the key holds another type, an ACL refuses the read) is this queue's
        // problem: an ERROR, so that it backs off and the pass goes on with the others.
        long long depth = 0;
        SessionReport report = jobbuf::redis::drain_session_depth(ctx->session, *ctx->waiter, q->target, &depth);
        if (report.status == SessionReport::Status::Refused) {
            ctx->waiter->raise_pending();
            ereport(ERROR, (errmsg("%s", report.message)));
        }
        if (!read_succeeded(ctx, report, result))
            return false;
        reading = reading_of(identity, true);
        reading->depth = depth;
        reading->read_at = now;
    }
    return room_at_depth(cap, reading->depth, now, progress, limit, result);
}

bool group_depth_room_for(const ActiveQueue* q, QueueProgress* progress, int* limit, BatchResult* result)
{
    long long cap = jobbuf::redis::queue_target_max_in_redis(q->target);
    if (cap <= 0)
        return true;
    TimestampTz now = GetCurrentTimestamp();
    if (now < progress->capped_until) {
        result->outcome = BatchOutcome::DepthCapped;
        return false;
    }
    // Claimed jobs are only in jobs_leased (queue, lease_until) WHERE group_id IS NOT NULL: the
    // count reads the queue's groups in flight, never its waiting jobs.
    Oid types[1] = {TEXTOID};
    kept_plan(&claimed_plan,
              "SELECT pg_catalog.count(*) FROM jobbuf.jobs j"
              " WHERE j.queue OPERATOR(pg_catalog.=) $1 AND j.group_id IS NOT NULL",
              1, types);
    Datum args[1] = {CStringGetTextDatum(q->name)};
    execute_kept(claimed_plan, args, nullptr, true, SPI_OK_SELECT, "counting a queue's claimed jobs");
    bool isnull = false;
    long long depth = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    return room_at_depth(cap, depth, now, progress, limit, result);
}

SessionReport read_pass_depths(DrainContext* ctx, const ActiveQueue* const* queues, QueueProgress* const* progress,
                               int count)
{
    if (pass_cxt == nullptr)
        pass_cxt = AllocSetContextCreate(TopMemoryContext, "jobbuf capped queues of a pass", ALLOCSET_SMALL_SIZES);
    MemoryContextReset(pass_cxt);
    if (readings != nullptr && hash_get_num_entries(readings) > 4 * Max(count, 1000)) {
        hash_destroy(readings);  // mostly keys of queues long gone
        readings = nullptr;
    }
    candidates = static_cast<Candidate*>(MemoryContextAlloc(pass_cxt, sizeof(Candidate) * Max(count, 1)));
    ncandidates = 0;
    candidates_pass = ctx->pass;
    for (int i = 0; i < count; i++) {
        if (jobbuf::redis::queue_target_max_in_redis(queues[i]->target) <= 0 || !progress[i]->pending ||
            queues[i]->group_delivery)
            continue;
        progress[i]->depth_pass = ctx->pass;
        progress[i]->depth_candidate = ncandidates;
        candidates[ncandidates++] = {queues[i]->target, progress[i]};
    }
    if (ncandidates < 2)
        return {};  // one queue reads its own, in as many round trips
    return read_candidates(ctx, 0, ncandidates, GetCurrentTimestamp());
}

namespace {

// The reading of q's key (nullptr: none, or q has no cap).
DepthReading* reading_of_queue(const ActiveQueue* q)
{
    if (jobbuf::redis::queue_target_max_in_redis(q->target) <= 0)
        return nullptr;
    return reading_of(jobbuf::redis::queue_target_depth_identity(q->target), false);
}

}  // namespace

void depth_spent(const ActiveQueue* q, int64 jobs)
{
    DepthReading* reading = reading_of_queue(q);
    if (reading != nullptr && reading->read_at != 0)
        reading->depth += jobs;
}

void depth_unknown(const ActiveQueue* q)
{
    if (DepthReading* reading = reading_of_queue(q))
        reading->read_at = 0;
}
