// Postgres regime: the census of the drain worker's queues and its minute of deliveries (see
// queue_census.h).
#include "pg_includes.h"

#include <cmath>

#include "census/queue_census.h"
#include "config/settings.h"
#include "delivery/held_jobs.h"
#include "drain/active_queues.h"
#include "metadata/extension_version.h"
#include "support/kept_plan.h"
#include "support/name_hash.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
}

using jobbuf::redis::JobResult;
using jobbuf::redis::StagedJob;

namespace {

constexpr int kPeriods = 12;          // the minute, in periods of
constexpr double kPeriodSeconds = 5;  // five seconds
constexpr int kBuckets = 96;          // bucket 0: under 1 ms; bucket b: [1 ms * 1.2^(b-1), 1 ms * 1.2^b)
constexpr double kBucketBase = 0.001;
constexpr double kBucketFactor = 1.2;

struct MinutePeriod {
    int64 period;  // the five-second period it counts (epoch seconds / 5); -1 when unused
    int64 delivered;
    uint32 waited[kBuckets];  // jobs by time in queue (deliveries without a time are not in it)
};

struct QueueMinute {
    char queue[NAMEDATALEN];  // hash key
    MinutePeriod periods[kPeriods];
};

// The walk: a census counts kStepRows jobs of jobbuf.jobs per step (jobbuf.census_step), one
// step between two of the worker's rounds, adding them up per queue until a step finds fewer.
constexpr int kStepRows = 5000;

struct QueueCount {
    char queue[NAMEDATALEN];  // hash key
    int64 jobs[4];            // by census_step's state: 0 ready, 1 scheduled, 2 claimed, 3 held
    bool has_ready;           // a ready job was seen: oldest_ready is when the oldest became ready
    TimestampTz oldest_ready;
};

HTAB* minutes = nullptr;
HTAB* walk_counts = nullptr;  // per queue; emptied when a walk starts
bool walking = false;         // a walk is under way (its next step is due at once)
int64 walk_after = 0;         // the largest id the walk counted
int walk_steps = 0;
int64 walk_jobs = 0;
TimestampTz walk_started = 0;
long walk_spent_ms = 0;      // the walk's steps, added up
double walk_longest_ms = 0;  // its longest step
SPIPlanPtr step_plan = nullptr;
SPIPlanPtr publish_plan = nullptr;
TimestampTz next_census = 0;

int bucket_of(double seconds)
{
    if (!(seconds >= kBucketBase))  // NaN, negative (Sidekiq takes scheduled jobs early), under 1 ms
        return 0;
    int b = 1 + static_cast<int>(std::floor(std::log(seconds / kBucketBase) / std::log(kBucketFactor)));
    return Min(b, kBuckets - 1);
}

// What a bucket reports: the geometric middle of its range.
double bucket_seconds(int b)
{
    if (b == 0)
        return kBucketBase / 2;
    return kBucketBase * std::pow(kBucketFactor, b - 0.5);
}

MinutePeriod* current_period(const char* queue, double now)
{
    if (minutes == nullptr)
        minutes = create_name_hash("jobbuf queue minute", sizeof(QueueMinute), 16);
    bool found = false;
    auto* entry = static_cast<QueueMinute*>(hash_search(minutes, queue, HASH_ENTER, &found));
    if (!found)
        for (auto& s : entry->periods)
            s.period = -1;
    int64 period = static_cast<int64>(now / kPeriodSeconds);
    MinutePeriod* s = &entry->periods[period % kPeriods];
    if (s->period != period) {
        memset(s, 0, sizeof(*s));
        s->period = period;
    }
    return s;
}

// The smallest time in queue that a fraction q of the jobs did not exceed; NaN when none.
double percentile(const uint32* waited, int64 jobs, double q)
{
    if (jobs == 0)
        return NAN;
    int64 rank = static_cast<int64>(std::ceil(q * static_cast<double>(jobs)));
    int64 seen = 0;
    for (int b = 0; b < kBuckets; b++) {
        seen += waited[b];
        if (seen >= rank)
            return bucket_seconds(b);
    }
    return bucket_seconds(kBuckets - 1);
}

// One step of the walk: adds the counts of the next kStepRows jobs; true when it reached the end.
bool walk_step(void)
{
    Oid types[2] = {INT8OID, INT4OID};
    kept_plan(&step_plan, "SELECT queue, state, jobs, since, last_id FROM jobbuf.census_step($1, $2)", 2, types);
    Datum args[2] = {Int64GetDatum(walk_after), Int32GetDatum(kStepRows)};
    execute_kept(step_plan, args, "  ", true, SPI_OK_SELECT, "queue census step");
    int64 counted = 0;
    for (uint64 i = 0; i < SPI_processed; i++) {
        HeapTuple tuple = SPI_tuptable->vals[i];
        TupleDesc desc = SPI_tuptable->tupdesc;
        bool isnull = false;
        char* queue = TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull));
        int state = DatumGetInt32(SPI_getbinval(tuple, desc, 2, &isnull));
        int64 jobs = DatumGetInt64(SPI_getbinval(tuple, desc, 3, &isnull));
        TimestampTz since = DatumGetTimestampTz(SPI_getbinval(tuple, desc, 4, &isnull));
        bool no_since = isnull;
        walk_after = Max(walk_after, DatumGetInt64(SPI_getbinval(tuple, desc, 5, &isnull)));
        bool found = false;
        auto* entry = static_cast<QueueCount*>(hash_search(walk_counts, queue, HASH_ENTER, &found));
        if (!found) {
            memset(entry->jobs, 0, sizeof(entry->jobs));
            entry->has_ready = false;
        }
        entry->jobs[state] += jobs;
        if (state == 0 && !no_since && (!entry->has_ready || since < entry->oldest_ready)) {
            entry->has_ready = true;
            entry->oldest_ready = since;
        }
        counted += jobs;
    }
    walk_steps++;
    walk_jobs += counted;
    return counted < kStepRows;
}

// Whether jobbuf.consumer_failures and jobbuf.held_discards can be locked as the census needs
// without waiting (the other tables: lock_jobbuf_tables).
bool lock_census_tables(void)
{
    Oid schema = get_namespace_oid("jobbuf", true);
    for (const char* name : {"consumer_failures", "held_discards"}) {
        Oid relid = OidIsValid(schema) ? get_relname_relid(name, schema) : InvalidOid;
        if (!OidIsValid(relid) || !ConditionalLockRelationOid(relid, RowExclusiveLock))
            return false;
    }
    return true;
}

// Publishes the walk's counts with the minute of every queue the worker delivered to.
void publish_census(void)
{
    int64 this_period = static_cast<int64>(now_epoch_seconds() / kPeriodSeconds);
    long n = minutes != nullptr ? hash_get_num_entries(minutes) : 0;
    Datum* names = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    Datum* delivered = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    Datum* p50 = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    Datum* p99 = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    bool* p_nulls = static_cast<bool*>(palloc(sizeof(bool) * (n + 1)));
    int count = 0;
    if (minutes != nullptr) {
        HASH_SEQ_STATUS scan;
        hash_seq_init(&scan, minutes);
        while (auto* entry = static_cast<QueueMinute*>(hash_seq_search(&scan))) {
            uint32 waited[kBuckets] = {0};
            int64 jobs = 0, total = 0;
            for (const auto& s : entry->periods) {
                // The last twelve five-second periods, the current one included.
                if (s.period < 0 || this_period - s.period >= kPeriods)
                    continue;
                total += s.delivered;
                for (int b = 0; b < kBuckets; b++) {
                    waited[b] += s.waited[b];
                    jobs += s.waited[b];
                }
            }
            if (total == 0 && jobs == 0) {
                // Nothing in the last minute (or a dropped queue): forgotten until it delivers again;
                // take_census shows 0 and NULL for a queue the arrays do not name.
                hash_search(minutes, entry->queue, HASH_REMOVE, nullptr);
                continue;
            }
            double median = percentile(waited, jobs, 0.5), high = percentile(waited, jobs, 0.99);
            names[count] = CStringGetTextDatum(entry->queue);
            delivered[count] = Int64GetDatum(total);
            p50[count] = Float8GetDatum(median);
            p99[count] = Float8GetDatum(high);
            p_nulls[count] = std::isnan(median);
            count++;
        }
    }
    int dims[1] = {count};
    int lbs[1] = {1};

    long q = hash_get_num_entries(walk_counts);
    Datum* queues = static_cast<Datum*>(palloc(sizeof(Datum) * (q + 1)));
    Datum* by_state[4];
    for (auto& column : by_state)
        column = static_cast<Datum*>(palloc(sizeof(Datum) * (q + 1)));
    Datum* oldest = static_cast<Datum*>(palloc(sizeof(Datum) * (q + 1)));
    bool* oldest_nulls = static_cast<bool*>(palloc(sizeof(bool) * (q + 1)));
    int queue_count = 0;
    int64 held = 0, held_queues = 0;
    HASH_SEQ_STATUS walked;
    hash_seq_init(&walked, walk_counts);
    while (auto* entry = static_cast<QueueCount*>(hash_seq_search(&walked))) {
        queues[queue_count] = CStringGetTextDatum(entry->queue);
        for (int state = 0; state < 4; state++)
            by_state[state][queue_count] = Int64GetDatum(entry->jobs[state]);
        oldest[queue_count] = entry->has_ready ? TimestampTzGetDatum(entry->oldest_ready) : (Datum)0;
        oldest_nulls[queue_count] = !entry->has_ready;
        held += entry->jobs[3];
        held_queues += entry->jobs[3] > 0 ? 1 : 0;
        queue_count++;
    }
    int queue_dims[1] = {queue_count};
    auto int8_array = [&](Datum* elements) {
        return PointerGetDatum(construct_array(elements, queue_count, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
    };
    Datum values[11] = {
        PointerGetDatum(construct_array(queues, queue_count, TEXTOID, -1, false, TYPALIGN_INT)),
        int8_array(by_state[0]),
        int8_array(by_state[1]),
        int8_array(by_state[2]),
        int8_array(by_state[3]),
        PointerGetDatum(construct_md_array(oldest, oldest_nulls, 1, queue_dims, lbs, TIMESTAMPTZOID, 8, FLOAT8PASSBYVAL,
                                           TYPALIGN_DOUBLE)),
        PointerGetDatum(construct_array(names, count, TEXTOID, -1, false, TYPALIGN_INT)),
        PointerGetDatum(construct_array(delivered, count, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)),
        PointerGetDatum(construct_md_array(p50, p_nulls, 1, dims, lbs, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)),
        PointerGetDatum(construct_md_array(p99, p_nulls, 1, dims, lbs, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)),
        TimestampTzGetDatum(walk_started)};
    char nulls[12] = "           ";
    Oid types[11] = {TEXTARRAYOID, INT8ARRAYOID, INT8ARRAYOID,   INT8ARRAYOID,   INT8ARRAYOID,  TIMESTAMPTZARRAYOID,
                     TEXTARRAYOID, INT8ARRAYOID, FLOAT8ARRAYOID, FLOAT8ARRAYOID, TIMESTAMPTZOID};
    kept_plan(&publish_plan, "SELECT jobbuf.publish_census($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)", 11, types);
    execute_kept(publish_plan, values, nulls, false, SPI_OK_SELECT, "queue census");
    note_held_count(held, held_queues);
    note_held_discards();
}

}  // namespace

void note_delivered_jobs(const char* queue, const StagedJob* jobs, const JobResult* results, uint64 count, double now)
{
    MinutePeriod* s = current_period(queue, now);
    for (uint64 i = 0; i < count; i++) {
        if (results[i] != JobResult::Delivered)
            continue;
        s->delivered++;
        s->waited[bucket_of(now - Max(jobs[i].staged_at, jobs[i].run_at))]++;
    }
}

void note_delivered_count(const char* queue, int64 count, double now)
{
    current_period(queue, now)->delivered += count;
}

long census_due_in_ms(void)
{
    if (walking)
        return 0;  // its next step after the next round
    TimestampTz now = GetCurrentTimestamp();
    return next_census <= now ? 0 : static_cast<long>((next_census - now) / 1000) + 1;
}

void take_census_if_due(void)
{
    TimestampTz started = GetCurrentTimestamp();
    if (RecoveryInProgress() || (!walking && started < next_census))
        return;
    long interval_ms = Min(jobbuf_poll_interval, 1000);
    if (!walking) {
        next_census = TimestampTzPlusMilliseconds(started, interval_ms);  // also after an error
        if (walk_counts != nullptr)
            hash_destroy(walk_counts);
        walk_counts = create_name_hash("jobbuf census walk", sizeof(QueueCount), 16);
        walk_after = 0;
        walk_steps = 0;
        walk_jobs = 0;
        walk_started = started;
        walk_spent_ms = 0;
        walk_longest_ms = 0;
    }
    walking = false;  // an error or a lock taken by DDL ends the walk: the next census starts anew
    if (strcmp(installed_extension_version(), kJobbufSqlVersion) != 0)
        return;  // no extension, or SQL older than the library: nothing to count into
    begin_worker_transaction("jobbuf: counting the queues' jobs");
    if (!lock_jobbuf_tables() || !lock_census_tables()) {
        abort_worker_transaction();  // DDL holds them: counted at the next census
        return;
    }
    bool done = walk_step();
    if (done)
        publish_census();
    commit_worker_transaction();
    double step_ms = static_cast<double>(GetCurrentTimestamp() - started) / 1000.0;
    walk_spent_ms += static_cast<long>(step_ms);
    walk_longest_ms = Max(walk_longest_ms, step_ms);
    walking = !done;
    if (walking)
        return;
    ereport(DEBUG1, (errmsg("jobbuf: census of %lld jobs in %d steps of %ld ms in all, the longest %.1f ms",
                            static_cast<long long>(walk_jobs), walk_steps, walk_spent_ms, walk_longest_ms)));
    next_census = TimestampTzPlusMilliseconds(walk_started, Max(interval_ms, 10 * walk_spent_ms));
}
