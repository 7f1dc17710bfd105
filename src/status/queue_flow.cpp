// Postgres regime: the held-back queues and Redis memory readings jobbuf_flow_status() and the
// exporter read (see queue_flow.h).
#include "pg_includes.h"

#include <climits>

#include "drain/active_queues.h"
#include "metadata/extension_version.h"
#include "status/queue_flow.h"
#include "support/kept_plan.h"
#include "support/name_hash.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
}

using jobbuf::redis::NodeMemoryReading;

namespace {

// A queue leaves a held-back state once it has not been held back for this long.
constexpr long kLeaveAfterMs = 10000;
// A held queue's row (its depth, its last hold) is rewritten at most this often.
constexpr long kRewriteEveryMs = 1000;
// The memory readings are written at most this often, and only when they moved (below); at least
// this often while they do not, so that an idle worker writes a minute apart, not a second.
constexpr long kMemoryEveryMs = 1000;
constexpr long kMemorySteadyMs = 60000;
constexpr int kMaxNodes = 64;

enum class FlowState { RedisMemory, DepthCap, RateLimited, Stopped };

const char* state_name(FlowState s)
{
    switch (s) {
        case FlowState::RedisMemory:
            return "redis_memory";
        case FlowState::DepthCap:
            return "depth_cap";
        case FlowState::RateLimited:
            return "rate_limited";
        default:
            return "stopped";
    }
}

struct QueueFlow {
    char queue[NAMEDATALEN];  // hash key
    FlowState state;
    char reason[256];
    long long depth;            // the depth last read while held back; -1: none
    TimestampTz waiting_since;  // when this spell of holding back began
    TimestampTz held_at;        // the last time a batch was held back
    bool refused;               // its target is refused: stopped until that changes
    bool written;               // a row is in jobbuf.queue_flow
    FlowState written_state;
    TimestampTz written_at;
    bool dirty;  // changed since written
};

HTAB* flows = nullptr;
TimestampTz next_check = 0;    // publish_flow_if_due has nothing to do before this
bool cleared_leftovers = false;  // the rows an earlier worker left were deleted
uint64 memory_generation = 0;    // of the readings last written
TimestampTz memory_written_at = 0;
NodeMemoryReading memory_written[kMaxNodes];  // the readings last written
int memory_written_count = 0;
SPIPlanPtr flow_plan = nullptr;
SPIPlanPtr memory_plan = nullptr;

// Whether the readings differ from those last written by more than the exporter would show: a
// node come or gone, a limit or a hold changed, or counted memory moved by 1 % of the limit (at
// least 1 MB).
bool memory_moved(const NodeMemoryReading* readings, int n)
{
    if (n != memory_written_count)
        return true;
    for (int i = 0; i < n; i++) {
        const NodeMemoryReading& a = readings[i];
        const NodeMemoryReading& b = memory_written[i];
        uint64 step = Max(a.limit_bytes / 100, static_cast<uint64>(1024 * 1024));
        uint64 moved = a.counted_bytes > b.counted_bytes ? a.counted_bytes - b.counted_bytes
                                                         : b.counted_bytes - a.counted_bytes;
        if (strcmp(a.node, b.node) != 0 || a.limit_bytes != b.limit_bytes || a.held != b.held || moved >= step)
            return true;
    }
    return false;
}

QueueFlow* flow_of(const char* queue, bool* found)
{
    if (flows == nullptr)
        flows = create_name_hash("jobbuf queue flow", sizeof(QueueFlow), 16);
    char key[NAMEDATALEN];
    strlcpy(key, queue, sizeof(key));
    return static_cast<QueueFlow*>(hash_search(flows, key, HASH_ENTER, found));
}

void note(const char* queue, FlowState state, long long depth, const char* reason, bool refused)
{
    bool found = false;
    TimestampTz now = GetCurrentTimestamp();
    QueueFlow* f = flow_of(queue, &found);
    if (!found) {
        f->written = false;
        f->waiting_since = now;
        f->depth = -1;
        f->reason[0] = '\0';
        f->refused = false;
    }
    bool changed = !found || f->state != state || f->refused != refused;
    f->state = state;
    f->refused = refused;
    f->held_at = now;
    if (depth >= 0)
        f->depth = depth;
    if (reason != nullptr)
        strlcpy(f->reason, reason, sizeof(f->reason));
    f->dirty = true;
    if (changed || !f->written)
        next_check = 0;
    else
        next_check = Min(next_check == 0 ? PG_INT64_MAX : next_check,
                         TimestampTzPlusMilliseconds(f->written_at, kRewriteEveryMs));
}

Oid jobbuf_table(const char* name)
{
    Oid schema = get_namespace_oid("jobbuf", true);
    return OidIsValid(schema) ? get_relname_relid(name, schema) : InvalidOid;
}

Datum text_array(Datum* items, int n)
{
    return PointerGetDatum(construct_array(items, n, TEXTOID, -1, false, TYPALIGN_INT));
}

Datum nullable_array(Datum* items, bool* nulls, int n, Oid type)
{
    int dims[1] = {n};
    int lbs[1] = {1};
    return PointerGetDatum(construct_md_array(items, nulls, 1, dims, lbs, type, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

// Writes the queues' rows: deletes those that left (and, the first time, every row this worker
// did not write: an earlier worker's), upserts the changed ones.
void write_flows(TimestampTz now)
{
    long n = flows != nullptr ? hash_get_num_entries(flows) : 0;
    Datum* gone = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    Datum* names = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    Datum* states = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    Datum* reasons = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    Datum* depths = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    bool* depth_nulls = static_cast<bool*>(palloc(sizeof(bool) * (n + 1)));
    Datum* since = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    Datum* held = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    bool* no_nulls = static_cast<bool*>(palloc0(sizeof(bool) * (n + 1)));
    Datum* kept = static_cast<Datum*>(palloc(sizeof(Datum) * (n + 1)));
    int ngone = 0, nput = 0, nkept = 0;
    if (flows != nullptr) {
        HASH_SEQ_STATUS seq;
        hash_seq_init(&seq, flows);
        while (auto* f = static_cast<QueueFlow*>(hash_seq_search(&seq))) {
            bool left = !f->refused && TimestampDifferenceExceeds(f->held_at, now, static_cast<int>(kLeaveAfterMs) - 1);
            if (left) {
                if (f->written)
                    gone[ngone++] = CStringGetTextDatum(f->queue);
                continue;
            }
            kept[nkept++] = CStringGetTextDatum(f->queue);
            bool due = !f->written || f->written_state != f->state ||
                       (f->dirty && TimestampDifferenceExceeds(f->written_at, now, static_cast<int>(kRewriteEveryMs) - 1));
            if (!due)
                continue;
            names[nput] = CStringGetTextDatum(f->queue);
            states[nput] = CStringGetTextDatum(state_name(f->state));
            reasons[nput] = CStringGetTextDatum(f->reason);
            depths[nput] = Int64GetDatum(f->depth);
            depth_nulls[nput] = f->depth < 0;
            since[nput] = TimestampTzGetDatum(f->waiting_since);
            held[nput] = TimestampTzGetDatum(f->held_at);
            nput++;
        }
    }
    if (ngone == 0 && nput == 0 && cleared_leftovers)
        return;
    Datum values[8] = {text_array(gone, ngone),
                       text_array(names, nput),
                       text_array(states, nput),
                       text_array(reasons, nput),
                       nullable_array(depths, depth_nulls, nput, INT8OID),
                       nullable_array(since, no_nulls, nput, TIMESTAMPTZOID),
                       nullable_array(held, no_nulls, nput, TIMESTAMPTZOID),
                       cleared_leftovers ? (Datum)0 : text_array(kept, nkept)};
    char nulls[9] = "       ";
    nulls[7] = cleared_leftovers ? 'n' : ' ';
    Oid types[8] = {TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID,        TEXTARRAYOID,
                    INT8ARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID, TEXTARRAYOID};
    kept_plan(&flow_plan,
              "WITH gone AS ("
              "  DELETE FROM jobbuf.queue_flow f WHERE f.queue OPERATOR(pg_catalog.=) ANY ($1)"
              "     OR ($8 IS NOT NULL AND f.queue OPERATOR(pg_catalog.<>) ALL ($8))"
              ") INSERT INTO jobbuf.queue_flow AS f (queue, state, reason, depth_in_redis, waiting_since, held_at)"
              "  SELECT u.queue, u.state, CASE WHEN u.reason OPERATOR(pg_catalog.=) '' THEN NULL ELSE u.reason END,"
              "         u.depth, u.since, u.held"
              "  FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4),"
              "                  pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7))"
              "       AS u(queue, state, reason, depth, since, held)"
              "  ON CONFLICT (queue) DO UPDATE SET state = excluded.state, reason = excluded.reason,"
              "     depth_in_redis = excluded.depth_in_redis, waiting_since = excluded.waiting_since,"
              "     held_at = excluded.held_at",
              8, types);
    execute_kept(flow_plan, values, nulls, false, SPI_OK_INSERT, "queue flow");
}

// Marks what write_flows wrote (after the commit), forgets the queues that left, and sets when
// the next look is due.
void flows_written(TimestampTz now)
{
    next_check = PG_INT64_MAX;
    cleared_leftovers = true;
    if (flows == nullptr)
        return;
    HASH_SEQ_STATUS seq;
    hash_seq_init(&seq, flows);
    while (auto* f = static_cast<QueueFlow*>(hash_seq_search(&seq))) {
        if (!f->refused && TimestampDifferenceExceeds(f->held_at, now, static_cast<int>(kLeaveAfterMs) - 1)) {
            hash_search(flows, f->queue, HASH_REMOVE, nullptr);
            continue;
        }
        bool due = !f->written || f->written_state != f->state ||
                   (f->dirty && TimestampDifferenceExceeds(f->written_at, now, static_cast<int>(kRewriteEveryMs) - 1));
        if (due) {
            f->written = true;
            f->written_state = f->state;
            f->written_at = now;
            f->dirty = false;
        }
        if (!f->refused)
            next_check = Min(next_check, TimestampTzPlusMilliseconds(f->held_at, kLeaveAfterMs));
        if (f->dirty)
            next_check = Min(next_check, TimestampTzPlusMilliseconds(f->written_at, kRewriteEveryMs));
    }
}

// Writes the guard's readings (n of them, generation: see drain_session_memory_readings).
void write_memory(const NodeMemoryReading* readings, int n, uint64 generation, TimestampTz now)
{
    Datum nodes[kMaxNodes], counted[kMaxNodes], limits[kMaxNodes], held[kMaxNodes];
    bool limit_nulls[kMaxNodes], no_nulls[kMaxNodes];
    for (int i = 0; i < n; i++) {
        nodes[i] = CStringGetTextDatum(readings[i].node);
        counted[i] = Int64GetDatum(static_cast<int64>(readings[i].counted_bytes));
        limits[i] = Int64GetDatum(static_cast<int64>(readings[i].limit_bytes));
        limit_nulls[i] = readings[i].limit_bytes == 0;
        held[i] = BoolGetDatum(readings[i].held);
        no_nulls[i] = false;
    }
    int dims[1] = {n};
    int lbs[1] = {1};
    Datum values[4] = {text_array(nodes, n), nullable_array(counted, no_nulls, n, INT8OID),
                       nullable_array(limits, limit_nulls, n, INT8OID),
                       PointerGetDatum(construct_md_array(held, no_nulls, 1, dims, lbs, BOOLOID, 1, true, TYPALIGN_CHAR))};
    Oid types[4] = {TEXTARRAYOID, INT8ARRAYOID, INT8ARRAYOID, BOOLARRAYOID};
    kept_plan(&memory_plan,
              "WITH gone AS ("
              "  DELETE FROM jobbuf.redis_memory m WHERE m.node OPERATOR(pg_catalog.<>) ALL ($1)"
              ") INSERT INTO jobbuf.redis_memory AS m (node, counted_bytes, limit_bytes, held, read_at)"
              "  SELECT u.node, u.counted, u.lim, u.held, pg_catalog.now()"
              "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3),"
              "                  pg_catalog.unnest($4)) AS u(node, counted, lim, held)"
              "  ON CONFLICT (node) DO UPDATE SET counted_bytes = excluded.counted_bytes,"
              "     limit_bytes = excluded.limit_bytes, held = excluded.held, read_at = excluded.read_at",
              4, types);
    execute_kept(memory_plan, values, nullptr, false, SPI_OK_INSERT, "Redis memory readings");
}

}  // namespace

void note_flow_held(const char* queue, FlowHold why, long long depth, const char* reason)
{
    FlowState state = why == FlowHold::RedisMemory ? FlowState::RedisMemory
                      : why == FlowHold::DepthCap  ? FlowState::DepthCap
                                                   : FlowState::RateLimited;
    note(queue, state, depth, reason, false);
}

void note_flow_refused(const char* queue, const char* reason)
{
    if (reason != nullptr) {
        note(queue, FlowState::Stopped, -1, reason, true);
        return;
    }
    if (flows == nullptr)
        return;
    auto* f = static_cast<QueueFlow*>(hash_search(flows, queue, HASH_FIND, nullptr));
    if (f != nullptr && f->refused) {
        f->refused = false;  // leaves like a held queue: now, its last note being older than 10 s or not
        f->held_at = 0;
        next_check = 0;
    }
}

long flow_due_in_ms(void)
{
    if (next_check == PG_INT64_MAX)
        return LONG_MAX;
    TimestampTz now = GetCurrentTimestamp();
    return next_check <= now ? 0 : static_cast<long>((next_check - now) / 1000) + 1;
}

void publish_flow_if_due(const jobbuf::redis::DrainSession* session)
{
    TimestampTz now = GetCurrentTimestamp();
    bool flows_due = next_check <= now;
    NodeMemoryReading readings[kMaxNodes];
    uint64 generation = 0;
    int nreadings = jobbuf::redis::drain_session_memory_readings(session, readings, kMaxNodes, &generation);
    // New readings, a second after the last ones written.
    bool memory_due = generation != memory_generation &&
                      TimestampDifferenceExceeds(memory_written_at, now, static_cast<int>(kMemoryEveryMs) - 1) &&
                      (memory_moved(readings, nreadings) ||
                       TimestampDifferenceExceeds(memory_written_at, now, static_cast<int>(kMemorySteadyMs) - 1));
    if ((!flows_due && !memory_due) || RecoveryInProgress())
        return;
    if (strcmp(installed_extension_version(), kJobbufSqlVersion) != 0)
        return;
    // An error below leaves these: the next attempt comes a second later, not at every round.
    if (flows_due)
        next_check = TimestampTzPlusMilliseconds(now, kRewriteEveryMs);
    if (memory_due)
        memory_written_at = now;
    begin_worker_transaction("jobbuf: noting held-back queues");
    Oid flow_rel = jobbuf_table("queue_flow");
    Oid memory_rel = jobbuf_table("redis_memory");
    // Without waiting: DDL (or a superuser's LOCK TABLE) holds it, written at the next look.
    if (!OidIsValid(flow_rel) || !OidIsValid(memory_rel) || !ConditionalLockRelationOid(flow_rel, RowExclusiveLock) ||
        !ConditionalLockRelationOid(memory_rel, RowExclusiveLock)) {
        abort_worker_transaction();
        next_check = TimestampTzPlusMilliseconds(now, kRewriteEveryMs);
        return;
    }
    if (flows_due)
        write_flows(now);
    if (memory_due)
        write_memory(readings, nreadings, generation, now);
    commit_worker_transaction();
    if (flows_due)
        flows_written(now);
    if (memory_due) {
        memory_generation = generation;
        memcpy(memory_written, readings, sizeof(NodeMemoryReading) * nreadings);
        memory_written_count = nreadings;
    }
}
