// Postgres regime: storage rotation of jobbuf.jobs, jobbuf.queue_stats and jobbuf.delivery_counter (see storage_rotation.h
// and docs/storage.md).
#include "pg_includes.h"

#include "config/settings.h"
#include "metadata/jobs_table_shape.h"
#include "pg_compat.h"
#include "rotation/rows_put_back.h"
#include "rotation/storage_rotation.h"
#include "rotation/storage_truncation.h"
#include "worker/worker_transaction.h"

extern "C" {
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/heap.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

namespace {

constexpr long kCheckEveryMs = 200;
// Due when the heap has reached 8 MB and its live rows fill at most a quarter of it: under a
// working vacuum the table stays below that, so rotation only acts when vacuum cannot reclaim.
// While the xmin horizon is held back by a transaction or snapshot older than 15 s (a report,
// pg_dump, a session idle in transaction), due from 1 MB already, with live rows filling at most
// half of it: every scan that walks the index entries of delivered jobs (a full pass, the
// census) visits the heap for each one, since none can be marked dead; 8 MB of them cost 7-17 ms
// per walk at 2,000 jobs/s, 1 MB about an eighth of that. 15 s and not less: a horizon a few
// seconds behind is normal (an ANALYZE, a standby's feedback every 10 s), and rotations cost
// their lock, their copy and new catalog rows.
// The n-th rotation under the same held horizon is due from n pages if that is more than 1 MB:
// each rotation gives the table and its used indexes new files (storage_truncation.h), and the
// held horizon keeps every pg_class version that wrote, so the next rotation's catalog updates
// (and every backend's reload of the table) walk n versions per relation. Rotations then come
// n times less often and cost n times more: their total cost stays flat however long the
// horizon is held. At 23,000 jobs/s 1 MB fills in 0.2 s; without this, rotations held the lock
// longer each time (6 ms, 9 ms after 500 rotations) and p99 grew all through a ten-minute
// snapshot.
constexpr BlockNumber kRotateAtBlocks = (8 * 1024 * 1024) / BLCKSZ;
constexpr uint64 kLiveShare = 4;
constexpr BlockNumber kRotateHeldAtBlocks = (1024 * 1024) / BLCKSZ;
constexpr uint64 kHeldLiveShare = 2;
constexpr long kHeldAfterMs = 15 * 1000;
// Producers wait for the rotation once it holds the lock: it moves at most this much.
constexpr uint64 kMaxLiveRows = 10000;
constexpr uint64 kMaxLiveBytes = 32 * 1024 * 1024;
// Values kept out of line are never read under the lock beyond this much: while live rows hold
// more in the TOAST table, only the heap gets a new file and their TOAST pointers are put back as
// they are (a 40 MB job due tomorrow costs the rotation its pointer's 18 bytes); the TOAST table
// is rotated, its live values re-toasted into its new file, once they are this small again.
constexpr uint64 kMaxRetoastBytes = 8 * 1024 * 1024;
// The lock is tried, never waited for, every kLockPollUs for up to kLockSpinUs: a busy table is
// free only between its producers' transactions. Then again after a growing pause.
constexpr long kLockSpinUs = 20000;
constexpr long kLockPollUs = 200;
constexpr long kRetryMinMs = 100;
// Every lock a rotation needs is taken without waiting (lock_storage_without_waiting); a wait it
// did not foresee (a catalog row another transaction updates or locks) ends the attempt after
// this, instead of holding producers behind the table's lock: it counts as a busy lock.
constexpr const char* kLockTimeout = "100ms";
constexpr long kRetryMaxMs = 2000;
// A table with too many live rows (a backlog) is looked at again after 5 s; one below 8 MB after
// 1 s (the live rows of a burst are delivered within moments, and counting them costs little).
constexpr long kTooLiveRetryMs = 5000;
constexpr long kTooLiveSmallRetryMs = 1000;

// The tables the worker rotates, each checked on its own schedule.
struct RotatedTable {
    const char* name;
    BlockNumber rotate_at_blocks;       // the heap size from which rotation is due
    BlockNumber held_at_blocks;         // ... while the xmin horizon is held back
    bool (*is_pristine)(Relation rel);  // as the extension made it: a TRUNCATE changes nothing else
    TimestampTz next_check;
    long lock_retry_ms;
    BlockNumber last_blocks;   // the heap's size at the last check
    uint32 held_rotations;     // rotations since the xmin horizon was last seen not held back
    bool lock_timeout_logged;  // since the last rotation: logged once, not at every attempt
};

// The next transaction id as the worker saw it over the last 30 s or so, one sample a second:
// when the xmin horizon has not passed the one of 15 s ago, a transaction or snapshot older than
// that still runs, and nothing deleted since can be vacuumed.
struct NextXidSample {
    TimestampTz at;
    TransactionId next_xid;
};
constexpr int kNextXidSamples = 32;
NextXidSample next_xid_samples[kNextXidSamples];
int next_xid_newest = -1;

void sample_next_xid(TimestampTz now)
{
    if (next_xid_newest >= 0 && now - next_xid_samples[next_xid_newest].at < 1000 * 1000)
        return;
    next_xid_newest = (next_xid_newest + 1) % kNextXidSamples;
    next_xid_samples[next_xid_newest] = {now, ReadNextTransactionId()};
}

bool horizon_held_back(Relation rel)
{
    if (next_xid_newest < 0)
        return false;
    // The newest sample at least kHeldAfterMs old (none yet: not known to be held).
    TimestampTz cutoff = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), -kHeldAfterMs);
    for (int k = 0; k < kNextXidSamples; k++) {
        const NextXidSample& sample = next_xid_samples[(next_xid_newest - k + kNextXidSamples) % kNextXidSamples];
        if (sample.at == 0)
            return false;
        if (sample.at <= cutoff)
            return TransactionIdPrecedes(GetOldestNonRemovableTransactionId(rel), sample.next_xid);
    }
    return false;
}

bool stats_table_is_pristine(Relation rel);
bool counter_table_is_pristine(Relation rel);

RotatedTable rotated_tables[] = {
    {"jobs", kRotateAtBlocks, kRotateHeldAtBlocks, jobs_table_is_pristine, 0, kRetryMinMs, 0, 0, false},
    // The worker updates a queue's counters row in every batch (by its address, not walking its
    // versions: delivery_stats.cpp): under a held snapshot each batch leaves a version nobody
    // can remove, which readers of the table walk past. 128 pages hold about 12,000 versions.
    {"queue_stats", 128, 128, stats_table_is_pristine, 0, kRetryMinMs, 0, 0, false},
    // The delivery counter's one row gets a version per batch (and one per lease lifetime while
    // idle: delivery_counter.h), updated by address as queue_stats is. 16 pages hold about 2,700.
    {"delivery_counter", 16, 16, counter_table_is_pristine, 0, kRetryMinMs, 0, 0, false},
};

enum class Outcome { NotDue, Rotated, LockBusy, TooLive };

// The heap size from which rotation is due without a held horizon: jobbuf.rotation_min_size when
// set (at least one page: an empty table is never rotated), which tests use to force rotations.
BlockNumber rotate_at_blocks(const RotatedTable& table)
{
    if (jobbuf_rotation_min_size < 0)
        return table.rotate_at_blocks;
    return Max(static_cast<BlockNumber>(jobbuf_rotation_min_size), 1);
}

// jobbuf.queue_stats as created: a plain table whose only triggers are its foreign key's, with no
// rules, no row security and nothing referencing it.
bool stats_table_is_pristine(Relation rel)
{
    if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relrowsecurity || rel->rd_rel->relhasrules)
        return false;
    if (rel->trigdesc != nullptr)
        for (int i = 0; i < rel->trigdesc->numtriggers; i++)
            if (!rel->trigdesc->triggers[i].tgisinternal)
                return false;
    return heap_truncate_find_FKs(list_make1_oid(RelationGetRelid(rel))) == NIL;
}

// jobbuf.delivery_counter as created: as queue_stats, except for its one trigger of the
// extension's, delivery_counter_not_replicated (a row trigger calling jobbuf.skip_replicated_row,
// which a rotation, moving the row without an INSERT or UPDATE, never fires).
bool counter_table_is_pristine(Relation rel)
{
    if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relrowsecurity || rel->rd_rel->relhasrules)
        return false;
    if (rel->trigdesc != nullptr)
        for (int i = 0; i < rel->trigdesc->numtriggers; i++) {
            const Trigger& trigger = rel->trigdesc->triggers[i];
            if (trigger.tgisinternal)
                continue;
            Oid function_schema = get_func_namespace(trigger.tgfoid);
            const char* function = get_func_name(trigger.tgfoid);
            bool ours = strcmp(trigger.tgname, "delivery_counter_not_replicated") == 0 &&
                        TRIGGER_FOR_ROW(trigger.tgtype) && !TRIGGER_FOR_TRUNCATE(trigger.tgtype) &&
                        function != nullptr && strcmp(function, "skip_replicated_row") == 0 &&
                        function_schema == RelationGetNamespace(rel);
            if (!ours)
                return false;
        }
    return heap_truncate_find_FKs(list_make1_oid(RelationGetRelid(rel))) == NIL;
}

struct LiveRows {
    HeapTuple* tuples;  // copies with their headers and TOAST pointers (nothing detoasted)
    uint64 count;
    uint64 bytes;          // as stored in the heap
    uint64 toasted_bytes;  // kept out of line, in the TOAST table
};

// The rows of rel alive as of a snapshot taken now, counted (and copied into *rows when copy)
// until either limit on the heap's share: false when the table holds more. Nothing is detoasted:
// a TOAST pointer's stored size counts in toasted_bytes.
bool read_live_rows(Relation rel, uint64 max_rows, uint64 max_bytes, bool copy, LiveRows* rows)
{
    Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
    TableScanDesc scan = jobbuf_table_beginscan(rel, snapshot);
    *rows = {};
    uint64 capacity = copy ? 64 : 0;
    rows->tuples = copy ? static_cast<HeapTuple*>(palloc(sizeof(HeapTuple) * capacity)) : nullptr;
    bool fits = true;
    HeapTuple tuple;
    while ((tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
        if (rows->count + 1 > max_rows || rows->bytes + tuple->t_len > max_bytes) {
            fits = false;
            break;
        }
        if (copy) {
            if (rows->count == capacity) {
                capacity *= 2;
                rows->tuples = static_cast<HeapTuple*>(repalloc(rows->tuples, sizeof(HeapTuple) * capacity));
            }
            rows->tuples[rows->count] = heap_copytuple(tuple);
        }
        rows->count++;
        rows->bytes += tuple->t_len;
        rows->toasted_bytes += out_of_line_bytes(rel, tuple);
    }
    table_endscan(scan);
    UnregisterSnapshot(snapshot);
    return fits;
}

// ACCESS EXCLUSIVE on relid without joining its lock queue (a TRUNCATE queued behind pg_dump's
// ACCESS SHARE would block every producer behind it).
bool lock_without_waiting(Oid relid)
{
    for (long waited_us = 0;; waited_us += kLockPollUs) {
        if (ConditionalLockRelationOid(relid, AccessExclusiveLock))
            return true;
        if (waited_us >= kLockSpinUs)
            return false;
        CHECK_FOR_INTERRUPTS();
        pg_usleep(kLockPollUs);
    }
}

// The oldest transaction id whose effects a snapshot may still not see: xmin of a row committed
// before it is visible to every snapshot, running or to come (GetOldestNonRemovableTransactionId
// is vacuum's horizon for rel, standbys' feedback and replication slots included). As CLUSTER
// (copy_table_data), never older than the table's relfrozenxid, below which no row of the old file
// has an unfrozen xmin.
TransactionId freeze_cutoff(Relation rel)
{
    TransactionId cutoff = GetOldestNonRemovableTransactionId(rel);
    if (TransactionIdIsNormal(rel->rd_rel->relfrozenxid) && TransactionIdPrecedes(cutoff, rel->rd_rel->relfrozenxid))
        cutoff = rel->rd_rel->relfrozenxid;
    return cutoff;
}

// The new file's pg_class row as CLUSTER leaves it (the frozenXid it passes to
// swap_relation_files): relfrozenxid is the freeze cutoff, older than every unfrozen xmin put
// back (RelationSetNewRelfilenumber set RecentXmin, newer than the xmin of rows committed after an
// old snapshot). relminmxid stays GetOldestMultiXactId(): no row keeps a multixact (keep_visibility).
void set_frozen_xid(Relation rel, TransactionId frozen_xid)
{
    Relation pg_class = table_open(RelationRelationId, RowExclusiveLock);
    HeapTuple tuple = SearchSysCacheCopy1(RELOID, ObjectIdGetDatum(RelationGetRelid(rel)));
    if (!HeapTupleIsValid(tuple))
        elog(ERROR, "jobbuf: cache lookup failed for relation %u", RelationGetRelid(rel));
    reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relfrozenxid = frozen_xid;
    CatalogTupleUpdate(pg_class, &tuple->t_self, tuple);
    heap_freetuple(tuple);
    table_close(pg_class, RowExclusiveLock);
    CommandCounterIncrement();  // rel's relcache entry sees the value
}

// One attempt, inside the worker transaction begun by the caller. The table is looked at under
// ACCESS SHARE, taken without waiting; TooLive and LockBusy leave the table as it was. Every
// relation lock the change needs (the table, its TOAST table and that table's indexes, each
// index of the table) is taken, without waiting, before anything changes.
Outcome try_rotation(RotatedTable& table)
{
    Oid schema = get_namespace_oid("jobbuf", true);
    Oid relid = OidIsValid(schema) ? get_relname_relid(table.name, schema) : InvalidOid;
    if (!OidIsValid(relid) || !ConditionalLockRelationOid(relid, AccessShareLock))
        return Outcome::NotDue;
    Relation rel = table_open(relid, NoLock);
    // Only the table as the extension made it: an owner's trigger, rule or foreign key pointing at
    // it would see a TRUNCATE, or refuse it.
    BlockNumber blocks = RelationGetNumberOfBlocks(rel);
    table.last_blocks = blocks;
    BlockNumber due_at = rotate_at_blocks(table);
    bool held = false;
    if (blocks < due_at) {
        if (!horizon_held_back(rel))
            table.held_rotations = 0;
        else
            held = blocks >= Max(table.held_at_blocks, table.held_rotations);
    }
    if (rel->rd_rel->relam != HEAP_TABLE_AM_OID || !table.is_pristine(rel) || (blocks < due_at && !held)) {
        table_close(rel, NoLock);
        return Outcome::NotDue;
    }
    uint64 heap_bytes = static_cast<uint64>(blocks) * BLCKSZ;
    LiveRows rows;
    bool mostly_dead =
        read_live_rows(rel, kMaxLiveRows, heap_bytes / (held ? kHeldLiveShare : kLiveShare), false, &rows);
    table_close(rel, NoLock);
    if (!mostly_dead)
        return Outcome::TooLive;
    if (!lock_without_waiting(relid))
        return Outcome::LockBusy;
    rel = table_open(relid, NoLock);
    // The TOAST table is locked (and rotated) only when its live values looked small enough to
    // re-toast: with more, a VACUUM of it (frequent when it is large) never holds the rotation up.
    bool toast_locked = rows.toasted_bytes <= kMaxRetoastBytes;
    if (!lock_storage_without_waiting(rel, toast_locked)) {
        table_close(rel, NoLock);
        return Outcome::LockBusy;  // a VACUUM of the TOAST table, a REINDEX: the caller's commit releases the locks
    }

    // Nobody else holds a lock on the table now: every transaction that staged, took, claimed or
    // deleted rows in it has ended, so a snapshot taken now sees each live row in its last state.
    MemoryContext rows_cxt = AllocSetContextCreate(TopTransactionContext, "jobbuf rotation", ALLOCSET_DEFAULT_SIZES);
    MemoryContext caller_cxt = MemoryContextSwitchTo(rows_cxt);
    bool fits = read_live_rows(rel, 2 * kMaxLiveRows, kMaxLiveBytes, true, &rows);
    bool rotate_toast = fits && toast_locked && rows.toasted_bytes <= kMaxRetoastBytes;
    if (rotate_toast)
        for (uint64 i = 0; i < rows.count; i++)
            flatten_row(rel, &rows.tuples[i]);  // from the old TOAST file, before it is left
    MemoryContextSwitchTo(caller_cxt);
    if (!fits) {
        table_close(rel, NoLock);
        return Outcome::TooLive;  // nothing changed; the lock goes at the caller's commit
    }
    TransactionId frozen_xid = freeze_cutoff(rel);
    give_new_heap_file(rel, rotate_toast);
    set_frozen_xid(rel, frozen_xid);
    put_back_rows(rel, rows.tuples, rows.count, frozen_xid, rotate_toast);
    MemoryContextDelete(rows_cxt);
    CommandCounterIncrement();
    rebuild_used_indexes(rel);
    // The statistics as after a TRUNCATE and the inserts of the rows put back: no dead rows.
    pgstat_count_truncate(rel);
    pgstat_count_heap_insert(rel, static_cast<PgStat_Counter>(rows.count));
    table_close(rel, NoLock);
    return Outcome::Rotated;
}

// The worker pins lock_timeout to 0 at PGC_S_OVERRIDE (worker_session.cpp); a value set at that
// source is kept past the transaction's end, so the attempt puts the 0 back itself, on every path:
// left at 100 ms, every later statement of the worker (a batch, a tick) would give up waiting.
void restore_pinned_lock_timeout(void)
{
    SetConfigOption("lock_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
}

// One attempt in a transaction of its own, with lock_timeout set for the attempt only (the
// worker's pinned 0 is put back at its end, commit or abort). An attempt that ran into the lock
// timeout is rolled back and counts as LockBusy: logged once (LOG) until the table rotates
// again, not at every attempt. Any other error goes to the caller (run_guarded).
Outcome attempt_rotation(RotatedTable& table)
{
    MemoryContext caller_cxt = CurrentMemoryContext;
    volatile Outcome outcome = Outcome::LockBusy;
    PG_TRY();
    {
        begin_worker_transaction("jobbuf: storage rotation");
        set_config_option("lock_timeout", kLockTimeout, PGC_SUSET, PGC_S_OVERRIDE, GUC_ACTION_LOCAL, true, ERROR,
                          false);
        outcome = try_rotation(table);
        commit_worker_transaction();  // unless it rotated, nothing was written: this releases the locks
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(caller_cxt);
        ErrorData* error = CopyErrorData();
        if (error->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE) {
            FreeErrorData(error);
            restore_pinned_lock_timeout();
            PG_RE_THROW();
        }
        FlushErrorState();
        AbortCurrentTransaction();
        pgstat_report_activity(STATE_IDLE, nullptr);
        if (!table.lock_timeout_logged)
            ereport(LOG,
                    (errmsg("jobbuf: storage rotation of jobbuf.%s gave up waiting for a lock (%s); it tries again "
                            "later",
                            table.name, error->message)));
        table.lock_timeout_logged = true;
        FreeErrorData(error);
        outcome = Outcome::LockBusy;
    }
    PG_END_TRY();
    restore_pinned_lock_timeout();
    return outcome;
}

}  // namespace

void rotate_storage_if_due(void)
{
    sample_next_xid(GetCurrentTimestamp());
    for (RotatedTable& table : rotated_tables) {
        if (GetCurrentTimestamp() < table.next_check)
            continue;
        // An error in the attempt (caught by the caller) leaves this: tried again in 5 s.
        table.next_check = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kTooLiveRetryMs);
        Outcome outcome = attempt_rotation(table);
        long wait_ms = kCheckEveryMs;
        switch (outcome) {
            case Outcome::LockBusy:
                wait_ms = table.lock_retry_ms;
                table.lock_retry_ms = Min(table.lock_retry_ms * 2, kRetryMaxMs);
                break;
            case Outcome::TooLive:
                wait_ms = table.last_blocks >= rotate_at_blocks(table) ? kTooLiveRetryMs : kTooLiveSmallRetryMs;
                break;
            case Outcome::Rotated:
                table.held_rotations++;
                table.lock_retry_ms = kRetryMinMs;
                table.lock_timeout_logged = false;
                break;
            case Outcome::NotDue:
                table.lock_retry_ms = kRetryMinMs;
                break;
        }
        table.next_check = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms);
    }
}
