// Postgres regime: the drain's take by partition for fair_by queues (see fair_taker.h).
#include "pg_includes.h"

#include "delivery/direct_take.h"
#include "delivery/fair_taker.h"
#include "delivery/job_taker.h"
#include "metadata/jobs_table_shape.h"

extern "C" {
#include "access/genam.h"
#include "access/itup.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "nodes/primnodes.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
}

namespace {

// How many index entries the walk for jobs without a partition key may step past in a batch (a
// keyed job's, a delivered job's not yet vacuumed, one not due): a batch's worth while it finds
// such jobs, a probe's worth once a batch found none (a queue whose jobs all have a key pays that
// much, not a second walk over every job).
constexpr uint64 kUnkeyedProbe = 64;

// A set made by a take whose batch has not committed (yet, or ever): freed by the next take.
PartitionCursors* uninstalled = nullptr;

// True when index is jobs_partition_waiting as created: a valid btree on (queue, partition_key,
// id) WHERE partition_key IS NOT NULL AND group_id IS NULL.
bool partition_index_is_pristine(Relation index)
{
    Form_pg_index form = index->rd_index;
    if (index->rd_rel->relam != BTREE_AM_OID || !form->indisvalid || !form->indisready || form->indnatts != 3 ||
        form->indnkeyatts != 3 || form->indkey.values[0] != kJobsQueue ||
        form->indkey.values[1] != kJobsPartitionKey || form->indkey.values[2] != kJobsId ||
        RelationGetIndexExpressions(index) != NIL)
        return false;
    List* predicate = RelationGetIndexPredicate(index);
    if (list_length(predicate) != 2)
        return false;
    bool key_not_null = false, group_null = false;
    ListCell* cell;
    foreach (cell, predicate) {
        if (!IsA(lfirst(cell), NullTest))
            return false;
        auto* test = static_cast<NullTest*>(lfirst(cell));
        if (!IsA(test->arg, Var))
            return false;
        AttrNumber column = reinterpret_cast<Var*>(test->arg)->varattno;
        key_not_null |= test->nulltesttype == IS_NOT_NULL && column == kJobsPartitionKey;
        group_null |= test->nulltesttype == IS_NULL && column == kJobsGroupId;
    }
    return key_not_null && group_null;
}

// A partition met in this batch's first round.
struct Partition {
    text* key;      // detoasted copy
    int64 after_id; // its walk stands here
    bool live;      // gave a job in its last turn: it may have more
};

struct FairTake {
    DirectTake take;
    const char* queue;
    Datum queue_text;  // the same as text, for the scans' keys
    const jobbuf::redis::TargetTraits* target;
    TakeBounds bounds;
    TakenBatch* taken;
    uint64 limit;
    bool full;  // by count or bytes: the batch takes no more
    // The jobs without a partition key, walked in jobs_waiting from the queue's cursor.
    Relation waiting;
    IndexScanDesc waiting_scan;
    int64 unkeyed_after;
    bool unkeyed_live;
    uint64 unkeyed_budget;  // entries (keyed, gone, not ready) the walk may still step past in this batch
    bool unkeyed_found;     // it took a job
    // The partitions, walked in jobs_partition_waiting.
    Relation partitions;
    IndexScanDesc partition_scan;  // (queue, partition_key, id > after): one partition's walk
    IndexScanDesc discover_scan;   // (queue, partition_key > after): the next partition
    IndexScanDesc between_scan;    // (queue, partition_key > after, partition_key < bound): the same, bounded
    Oid key_collation;
    bool key_deterministic;  // keys equal under key_collation are equal byte for byte
};

bool batch_full(FairTake* f, RowTake step)
{
    f->full = f->full || step == RowTake::Full || step == RowTake::TakenFull || f->taken->count >= f->limit;
    return f->full;
}

bool same_key(text* a, const char* b, int b_len)
{
    return VARSIZE_ANY_EXHDR(a) == static_cast<size_t>(b_len) && memcmp(VARDATA_ANY(a), b, b_len) == 0;
}

// The jobs without a partition key: their next job (with fill, every one until the batch is
// full), stepping past keyed entries (taken by their partitions' walks) within the batch's budget.
void unkeyed_turn(FairTake* f, bool fill)
{
    if (!f->unkeyed_live || f->full)
        return;
    ScanKeyData keys[3];
    ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, f->waiting->rd_indcollation[0],
                           F_TEXTEQ, f->queue_text);
    ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, InvalidOid, F_UUID_EQ,
                           UUIDPGetDatum(&f->take.own));
    ScanKeyEntryInitialize(&keys[2], 0, 3, BTGreaterStrategyNumber, InvalidOid, InvalidOid, F_INT8GT,
                           Int64GetDatum(f->unkeyed_after));
    index_rescan(f->waiting_scan, keys, 3, nullptr, 0);
    // Entry by entry, the id read from the index: an entry whose job is gone (delivered since the
    // last vacuum) counts against the budget too, and the walk moves past it.
    while (index_getnext_tid(f->waiting_scan, ForwardScanDirection) != nullptr) {
        bool isnull = false;
        int64 id = DatumGetInt64(index_getattr(f->waiting_scan->xs_itup, 3, f->waiting_scan->xs_itupdesc, &isnull));
        RowTake step = RowTake::PassedOver;
        if (index_fetch_heap(f->waiting_scan, f->take.slot)) {
            slot_getallattrs(f->take.slot);
            if (f->take.slot->tts_isnull[kJobsPartitionKey - 1])
                step = direct_take_row(&f->take, *f->target, f->bounds, f->taken);
        }
        if (step != RowTake::Full)
            f->unkeyed_after = id;
        bool taken = step == RowTake::Taken || step == RowTake::TakenFull;
        f->unkeyed_found |= taken;
        if (batch_full(f, step) || (taken && !fill))
            return;
        if (!taken && --f->unkeyed_budget == 0) {
            f->unkeyed_live = false;  // the next batch walks on from here
            return;
        }
    }
    f->unkeyed_live = false;
}

// Partition p's next job (with fill, every job it has until the batch is full).
void partition_turn(FairTake* f, Partition* p, bool fill)
{
    ScanKeyData keys[3];
    ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, f->partitions->rd_indcollation[0],
                           F_TEXTEQ, f->queue_text);
    ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, f->key_collation, F_TEXTEQ,
                           PointerGetDatum(p->key));
    ScanKeyEntryInitialize(&keys[2], 0, 3, BTGreaterStrategyNumber, InvalidOid, InvalidOid, F_INT8GT,
                           Int64GetDatum(p->after_id));
    index_rescan(f->partition_scan, keys, 3, nullptr, 0);
    p->live = false;
    while (index_getnext_slot(f->partition_scan, ForwardScanDirection, f->take.slot)) {
        slot_getallattrs(f->take.slot);
        int64 id = DatumGetInt64(f->take.slot->tts_values[kJobsId - 1]);
        RowTake step = direct_take_row(&f->take, *f->target, f->bounds, f->taken);
        if (step != RowTake::Full)
            p->after_id = id;
        if (step == RowTake::Taken || step == RowTake::TakenFull)
            p->live = true;
        if (batch_full(f, step)) {
            p->live = true;
            return;
        }
        if (step == RowTake::Taken && !fill)
            return;
    }
}

int compare_keys(const FairTake* f, text* a, text* b)
{
    return DatumGetInt32(DirectFunctionCall2Coll(bttextcmp, f->key_collation, PointerGetDatum(a), PointerGetDatum(b)));
}

int compare_key_pointers(const void* a, const void* b, void* arg)
{
    return compare_keys(static_cast<const FairTake*>(arg), *static_cast<text* const*>(a), *static_cast<text* const*>(b));
}

// The partition key of the entry scan (one of the discover scans) stands on, read from the index.
text* entry_key(IndexScanDesc scan)
{
    bool isnull = false;
    return DatumGetTextPP(index_getattr(scan->xs_itup, 2, scan->xs_itupdesc, &isnull));
}

// Whether the entry scan stands on belongs to partition key (the index gives keys in order: an
// entry past key's entries has a greater key).
bool in_partition(const FairTake* f, IndexScanDesc scan, text* key)
{
    text* entry = entry_key(scan);
    return f->key_deterministic ? same_key(key, VARDATA_ANY(entry), static_cast<int>(VARSIZE_ANY_EXHDR(entry)))
                                : compare_keys(f, entry, key) <= 0;
}

// The keys of the partitions the last committed batch left a cursor for, in key order.
int sorted_cursor_keys(const FairTake* f, const QueueProgress* progress, text*** keys)
{
    const PartitionCursors* cursors = progress->partitions;
    int n = cursors != nullptr ? cursors->count : 0;
    *keys = static_cast<text**>(palloc(sizeof(text*) * Max(n, 1)));
    for (int i = 0; i < n; i++)
        (*keys)[i] = cstring_to_text_with_len(cursors->cursors[i].key, cursors->cursors[i].key_len);
    qsort_arg(*keys, n, sizeof(text*), compare_key_pointers, const_cast<FairTake*>(f));
    return n;
}

// The walk where the last committed batch left partition key (0 when it left none).
int64 partition_cursor(const QueueProgress* progress, text* key)
{
    const PartitionCursors* cursors = progress->partitions;
    for (int i = 0; cursors != nullptr && i < cursors->count; i++)
        if (same_key(key, cursors->cursors[i].key, cursors->cursors[i].key_len))
            return cursors->cursors[i].after_id;
    return 0;
}

// The first round: every partition in key order, from the one after where the last batch's first
// round stopped, round to it again; each gives its oldest ready job. *stopped_at: the partition
// where the batch filled up first (nullptr when the round went all the way round).
//
// The next partition is the first index entry past the last one's key, its key read from the
// index alone. A partition the last batch left a cursor for is not looked for that way: the
// entries of its jobs delivered since the last vacuum lie before its cursor, and once a walk has
// marked them dead (a walk from the partition's head does, after a head pass) the index scan
// steps over them one by one, thousands of pages a batch behind a long backlog. So the search
// for the next partition stops at the next key with a cursor (an upper bound the scan checks
// against each page's high key), and that partition is taken up at its cursor directly.
int first_round(FairTake* f, const QueueProgress* progress, Partition* parts, int capacity, text** stopped_at)
{
    const PartitionCursors* cursors = progress->partitions;
    text* start = nullptr;
    if (cursors != nullptr && cursors->next_key != nullptr)
        start = cstring_to_text_with_len(cursors->next_key, cursors->next_key_len);
    text** cursor_keys = nullptr;
    int ncursor_keys = sorted_cursor_keys(f, progress, &cursor_keys);
    int next_cursor_key = 0;  // cursor_keys[next_cursor_key] is the first one past after
    text* after = start;
    bool wrapped = start == nullptr;
    // The scan that found the last partition, standing on its first entry: when the entry after it
    // (on the leaf page the scan has read already) is another partition's, that is the next
    // partition, found without a descent (a million partitions of one job each). Its keys still
    // hold: no cursor key lies between the one it started after and its bound.
    IndexScanDesc going = nullptr;
    bool going_there = false;  // ... or already on the next partition's first entry
    int n = 0;
    *stopped_at = nullptr;
    while (!f->full && n < capacity) {
        while (after != nullptr && next_cursor_key < ncursor_keys &&
               compare_keys(f, cursor_keys[next_cursor_key], after) <= 0)
            next_cursor_key++;
        text* bound = next_cursor_key < ncursor_keys ? cursor_keys[next_cursor_key] : nullptr;
        IndexScanDesc scan = going;
        ItemPointer tid = nullptr;
        if (going_there) {
            tid = &going->xs_heaptid;
        } else if (going != nullptr) {
            tid = index_getnext_tid(going, ForwardScanDirection);
            if (tid != nullptr && in_partition(f, going, after))
                scan = nullptr;  // the last partition has more entries: a descent past them instead
        }
        going = nullptr;
        going_there = false;
        if (scan == nullptr) {
            // A scan's keys are as many as it began with: the first partition is "partition_key IS
            // NOT NULL" (or "< bound"), a bounded one past after has a third key.
            scan = f->discover_scan;
            ScanKeyData keys[3];
            ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
                                   f->partitions->rd_indcollation[0], F_TEXTEQ, f->queue_text);
            int nkeys = 1;
            if (after != nullptr)
                ScanKeyEntryInitialize(&keys[nkeys++], 0, 2, BTGreaterStrategyNumber, InvalidOid, f->key_collation,
                                       F_TEXT_GT, PointerGetDatum(after));
            if (bound != nullptr)
                ScanKeyEntryInitialize(&keys[nkeys++], 0, 2, BTLessStrategyNumber, InvalidOid, f->key_collation,
                                       F_TEXT_LT, PointerGetDatum(bound));
            if (nkeys == 1)
                ScanKeyEntryInitialize(&keys[nkeys++], SK_ISNULL | SK_SEARCHNOTNULL, 2, InvalidStrategy, InvalidOid,
                                       InvalidOid, InvalidOid, Datum(0));
            if (nkeys == 3)
                scan = f->between_scan;
            index_rescan(scan, keys, nkeys, nullptr, 0);
            // The next entry's key, read from the index alone: finding the next partition never walks
            // the entries of jobs delivered since the last vacuum (it would, through the heap).
            tid = index_getnext_tid(scan, ForwardScanDirection);
        }
        text* key = bound;  // none before the bound: the partition with the next cursor
        if (tid != nullptr) {
            key = entry_key(scan);
        } else if (bound == nullptr) {
            if (wrapped)
                break;
            wrapped = true;  // round to the first partition
            after = nullptr;
            next_cursor_key = 0;
            continue;
        }
        if (wrapped && start != nullptr && compare_keys(f, key, start) > 0)
            break;  // all the way round
        Partition* p = &parts[n++];
        p->key = tid != nullptr ? static_cast<text*>(PG_DETOAST_DATUM_COPY(PointerGetDatum(key))) : key;
        p->after_id = partition_cursor(progress, p->key);
        p->live = false;
        // A partition without a cursor: its walk from its head is the scan's own walk on from this
        // entry (the same entries in the same order), so its turn goes on in this scan, without a
        // second descent: its oldest job visible now, entry by entry (a million partitions of one
        // job each cost no descent a job; a partition whose jobs were all delivered since the last
        // vacuum, met again after a head pass, costs its entries, not two descents).
        if (tid != nullptr && p->after_id == 0) {
            for (;;) {
                if (index_fetch_heap(scan, f->take.slot)) {
                    slot_getallattrs(f->take.slot);
                    int64 id = DatumGetInt64(f->take.slot->tts_values[kJobsId - 1]);
                    RowTake step = direct_take_row(&f->take, *f->target, f->bounds, f->taken);
                    if (step != RowTake::Full)
                        p->after_id = id;
                    bool full = batch_full(f, step);  // always: it is what ends the round at the batch's size
                    if (step == RowTake::Taken || step == RowTake::TakenFull || full) {
                        p->live = true;
                        going = scan;  // on the job taken: the next entry may be the next partition's
                        break;
                    }
                }
                if (index_getnext_tid(scan, ForwardScanDirection) == nullptr)
                    break;  // nothing after it within the scan's keys: the next search descends
                if (!in_partition(f, scan, p->key)) {
                    going = scan;  // on the next partition's first entry
                    going_there = true;
                    break;
                }
            }
        } else {
            partition_turn(f, p, false);
            if (tid != nullptr)
                going = scan;
        }
        after = p->key;
        if (f->full || n == capacity)
            *stopped_at = p->key;
    }
    // Stopped at the bound before coming round: the next batch goes on from here at once.
    f->taken->partitions_left = !f->full && n == capacity;
    return n;
}

// Keeps where the partitions that may have more jobs stand (at most kMaxPartitionCursors), and
// where the next batch's first round starts, in a set installed once the batch commits.
void cursors_after(PartitionCursors* cursors, const Partition* parts, int n, text* stopped_at, bool unkeyed_found)
{
    cursors->unkeyed_found = unkeyed_found;
    MemoryContext old = MemoryContextSwitchTo(cursors->cxt);
    for (int i = 0; i < n && cursors->count < kMaxPartitionCursors; i++) {
        if (!parts[i].live)
            continue;
        PartitionCursor* c = &cursors->cursors[cursors->count++];
        c->key_len = static_cast<int>(VARSIZE_ANY_EXHDR(parts[i].key));
        c->key = static_cast<const char*>(memcpy(palloc(c->key_len + 1), VARDATA_ANY(parts[i].key), c->key_len));
        c->after_id = parts[i].after_id;
    }
    if (stopped_at != nullptr) {
        cursors->next_key_len = static_cast<int>(VARSIZE_ANY_EXHDR(stopped_at));
        cursors->next_key = static_cast<const char*>(
            memcpy(palloc(cursors->next_key_len + 1), VARDATA_ANY(stopped_at), cursors->next_key_len));
    }
    MemoryContextSwitchTo(old);
}

}  // namespace

bool take_jobs_fairly(const char* queue, const jobbuf::redis::TargetTraits& target, int limit,
                      const QueueProgress* progress, TakeBounds bounds, TakenBatch* taken)
{
    free_partition_cursors(uninstalled);
    uninstalled = nullptr;  // (an ERROR in the next line must not leave it pointing at freed memory)
    // Made before the batch's own memory: a set made after it, in the middle of the heap the
    // batch then frees, made glibc give that memory back and fault it in again on every batch.
    uninstalled = new_partition_cursors();
    FairTake f{};
    if (!direct_take_begin(&f.take, "jobs_partition_waiting", partition_index_is_pristine, limit, taken,
                           &f.partitions)) {
        free_partition_cursors(uninstalled);
        uninstalled = nullptr;
        return false;
    }
    Oid waiting_oid = get_relname_relid("jobs_waiting", RelationGetNamespace(f.take.jobs));
    f.waiting = OidIsValid(waiting_oid) ? index_open(waiting_oid, AccessShareLock) : nullptr;
    if (f.waiting == nullptr || f.waiting->rd_index->indrelid != RelationGetRelid(f.take.jobs) ||
        !waiting_index_is_pristine(f.waiting)) {
        if (f.waiting != nullptr)
            index_close(f.waiting, NoLock);
        direct_take_end(&f.take, f.partitions, taken);
        free_partition_cursors(uninstalled);
        uninstalled = nullptr;
        return false;
    }
    f.queue = queue;
    f.queue_text = CStringGetTextDatum(queue);
    f.target = &target;
    f.bounds = bounds;
    f.taken = taken;
    f.limit = static_cast<uint64>(Max(limit, 1));
    f.key_collation = f.partitions->rd_indcollation[1];
    f.key_deterministic = !OidIsValid(f.key_collation) || get_collation_isdeterministic(f.key_collation);
    f.unkeyed_after = progress->after_id;
    f.unkeyed_live = true;
    f.unkeyed_budget =
        progress->partitions == nullptr || progress->partitions->unkeyed_found ? f.limit : Min(f.limit, kUnkeyedProbe);
    f.waiting_scan = direct_take_scan(&f.take, f.waiting, 3);
    f.waiting_scan->xs_want_itup = true;  // each entry's id, read from the index
    f.partition_scan = direct_take_scan(&f.take, f.partitions, 3);
    f.discover_scan = direct_take_scan(&f.take, f.partitions, 2);
    f.discover_scan->xs_want_itup = true;  // the partition key, read from the index (index-only)
    f.between_scan = direct_take_scan(&f.take, f.partitions, 3);
    f.between_scan->xs_want_itup = true;

    // Round one: the jobs without a key, then every partition once.
    int capacity = static_cast<int>(Min(f.limit, static_cast<uint64>(100000))) + kMaxPartitionCursors;
    auto* parts = static_cast<Partition*>(palloc(sizeof(Partition) * capacity));
    unkeyed_turn(&f, false);
    text* stopped_at = nullptr;
    int n = first_round(&f, progress, parts, capacity, &stopped_at);
    // Further rounds over the partitions that gave a job; one partition left alone fills the batch.
    auto* live = static_cast<int*>(palloc(sizeof(int) * (n + 1)));
    while (!f.full) {
        int nlive = 0;
        for (int i = 0; i < n; i++)
            if (parts[i].live)
                live[nlive++] = i;
        if (nlive == 0 && !f.unkeyed_live)
            break;
        unkeyed_turn(&f, nlive == 0);
        for (int k = 0; k < nlive && !f.full; k++)
            partition_turn(&f, &parts[live[k]], nlive == 1 && !f.unkeyed_live);
    }

    taken->in_id_order = false;
    taken->cursor_after = f.unkeyed_after;
    cursors_after(uninstalled, parts, n, stopped_at, f.unkeyed_found);
    taken->partitions = uninstalled;
    index_endscan(f.waiting_scan);
    index_endscan(f.partition_scan);
    index_endscan(f.discover_scan);
    index_endscan(f.between_scan);
    index_close(f.waiting, NoLock);
    direct_take_end(&f.take, f.partitions, taken);
    return true;
}

void fair_take_committed(QueueProgress* progress, const TakenBatch& taken)
{
    if (taken.cursor_after > 0)
        progress->after_id = taken.cursor_after;
    install_partition_cursors(progress, taken.partitions);
    uninstalled = nullptr;  // the queue's now: not freed by the next take
}
