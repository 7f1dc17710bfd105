// Postgres regime: storage rotation of jobbuf.jobs (see storage_rotation.h and docs/storage.md).
#include "pg_includes.h"

#include "worker/storage_rotation.h"
#include "worker/worker_transaction.h"
#include "jobs_table_shape.h"

extern "C" {
#include "access/heapam.h"
#include "access/heaptoast.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

namespace {

constexpr long kCheckEveryMs = 200;
// Due when the heap has reached 8 MB and its live rows fill at most a quarter of it: under a
// working vacuum the table stays below that, so rotation only acts when vacuum cannot reclaim.
constexpr BlockNumber kRotateAtBlocks = (8 * 1024 * 1024) / BLCKSZ;
constexpr uint64 kLiveShare = 4;
// Producers wait for the rotation once it holds the lock: it moves at most this much.
constexpr uint64 kMaxLiveRows = 10000;
constexpr uint64 kMaxLiveBytes = 32 * 1024 * 1024;
// The lock is tried, never waited for, every kLockPollUs for up to kLockSpinUs: a busy table is
// free only between its producers' transactions. Then again after a growing pause.
constexpr long kLockSpinUs = 20000;
constexpr long kLockPollUs = 200;
constexpr long kRetryMinMs = 100;
constexpr long kRetryMaxMs = 2000;
constexpr long kTooLiveRetryMs = 5000;

TimestampTz next_check = 0;
long lock_retry_ms = kRetryMinMs;

enum class Outcome { NotDue, Rotated, LockBusy, TooLive };

struct LiveRows {
    HeapTuple* tuples;  // flattened copies (no TOAST pointers: TRUNCATE empties the TOAST table)
    uint64 count;
    uint64 bytes;
};

// The rows of rel alive as of a snapshot taken now, counted (and copied into *rows when copy)
// until either limit: false when the table holds more.
bool read_live_rows(Relation rel, uint64 max_rows, uint64 max_bytes, bool copy, LiveRows* rows)
{
    Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
    TableScanDesc scan = table_beginscan(rel, snapshot, 0, nullptr);
    TupleDesc desc = RelationGetDescr(rel);
    rows->count = 0;
    rows->bytes = 0;
    uint64 capacity = copy ? 64 : 0;
    rows->tuples = copy ? static_cast<HeapTuple*>(palloc(sizeof(HeapTuple) * capacity)) : nullptr;
    bool fits = true;
    HeapTuple tuple;
    while ((tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
        HeapTuple kept = nullptr;
        if (copy)
            kept = HeapTupleHasExternal(tuple) ? toast_flatten_tuple(tuple, desc) : heap_copytuple(tuple);
        uint64 length = kept != nullptr ? kept->t_len : tuple->t_len;
        if (rows->count + 1 > max_rows || rows->bytes + length > max_bytes) {
            fits = false;
            break;
        }
        if (copy) {
            if (rows->count == capacity) {
                capacity *= 2;
                rows->tuples = static_cast<HeapTuple*>(repalloc(rows->tuples, sizeof(HeapTuple) * capacity));
            }
            rows->tuples[rows->count] = kept;
        }
        rows->count++;
        rows->bytes += length;
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

// Puts rows back into the (just truncated) table, frozen: a snapshot older than the rotation
// still sees them, as it saw them before. Every index gets its entries.
void put_back(Oid relid, const LiveRows& rows)
{
    Relation rel = table_open(relid, NoLock);
    EState* estate = CreateExecutorState();
    ResultRelInfo* result_rel = makeNode(ResultRelInfo);
    InitResultRelInfo(result_rel, rel, 1, nullptr, 0);
    ExecOpenIndices(result_rel, false);
    TupleTableSlot* slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsHeapTuple);
    CommandId cid = GetCurrentCommandId(true);
    for (uint64 i = 0; i < rows.count; i++) {
        ExecStoreHeapTuple(rows.tuples[i], slot, false);
        table_tuple_insert(rel, slot, cid, TABLE_INSERT_FROZEN, nullptr);
        ExecInsertIndexTuples(result_rel, slot, estate, false, false, nullptr, NIL);
        ResetPerTupleExprContext(estate);
    }
    ExecDropSingleTupleTableSlot(slot);
    ExecCloseIndices(result_rel);
    FreeExecutorState(estate);
    table_close(rel, NoLock);
}

// One attempt, inside the worker transaction begun by the caller. The table is looked at under
// ACCESS SHARE, taken without waiting; TooLive and LockBusy leave the table as it was.
Outcome try_rotation(void)
{
    Oid schema = get_namespace_oid("jobbuf", true);
    Oid relid = OidIsValid(schema) ? get_relname_relid("jobs", schema) : InvalidOid;
    if (!OidIsValid(relid) || !ConditionalLockRelationOid(relid, AccessShareLock))
        return Outcome::NotDue;
    Relation rel = table_open(relid, NoLock);
    // Only the table as the extension made it: an owner's trigger, rule or foreign key pointing at
    // it would see a TRUNCATE, or refuse it.
    if (rel->rd_rel->relam != HEAP_TABLE_AM_OID || !jobs_table_is_pristine(rel) ||
        RelationGetNumberOfBlocks(rel) < kRotateAtBlocks) {
        table_close(rel, NoLock);
        return Outcome::NotDue;
    }
    uint64 heap_bytes = static_cast<uint64>(RelationGetNumberOfBlocks(rel)) * BLCKSZ;
    LiveRows rows;
    bool mostly_dead = read_live_rows(rel, kMaxLiveRows, heap_bytes / kLiveShare, false, &rows);
    table_close(rel, NoLock);
    if (!mostly_dead)
        return Outcome::TooLive;
    if (!lock_without_waiting(relid))
        return Outcome::LockBusy;

    // Nobody else holds a lock on the table now: every transaction that staged, took, claimed or
    // deleted rows in it has ended, so a snapshot taken now sees each live row in its last state.
    MemoryContext rows_cxt = AllocSetContextCreate(TopTransactionContext, "jobbuf rotation", ALLOCSET_DEFAULT_SIZES);
    MemoryContext caller_cxt = MemoryContextSwitchTo(rows_cxt);
    rel = table_open(relid, NoLock);
    bool fits = read_live_rows(rel, 2 * kMaxLiveRows, kMaxLiveBytes, true, &rows);
    table_close(rel, NoLock);  // TRUNCATE refuses a table this session still has open
    MemoryContextSwitchTo(caller_cxt);
    if (!fits)
        return Outcome::TooLive;  // nothing changed; the lock goes at the caller's commit
    if (SPI_execute("TRUNCATE jobbuf.jobs", false, 0) != SPI_OK_UTILITY)
        elog(ERROR, "jobbuf: TRUNCATE jobbuf.jobs failed during rotation");
    CommandCounterIncrement();
    put_back(relid, rows);
    MemoryContextDelete(rows_cxt);
    return Outcome::Rotated;
}

}  // namespace

void rotate_storage_if_due(void)
{
    TimestampTz now = GetCurrentTimestamp();
    if (now < next_check)
        return;
    begin_worker_transaction("jobbuf: storage rotation of jobbuf.jobs");
    Outcome outcome = try_rotation();
    commit_worker_transaction();  // unless it rotated, nothing was written: this releases the locks
    long wait_ms = kCheckEveryMs;
    switch (outcome) {
    case Outcome::LockBusy:
        wait_ms = lock_retry_ms;
        lock_retry_ms = Min(lock_retry_ms * 2, kRetryMaxMs);
        break;
    case Outcome::TooLive:
        wait_ms = kTooLiveRetryMs;
        break;
    case Outcome::Rotated:
    case Outcome::NotDue:
        lock_retry_ms = kRetryMinMs;
        break;
    }
    next_check = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms);
}
