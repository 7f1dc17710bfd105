// Postgres regime: the rows a storage rotation keeps, written into the table's new heap file (see
// rows_put_back.h).
#include "pg_includes.h"

#include "pg_compat.h"
#include "rotation/rows_put_back.h"

extern "C" {
#include "access/detoast.h"
#include "access/heapam.h"
#include "access/heaptoast.h"
#include "access/hio.h"
#include "access/htup_details.h"
#include "access/transam.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "utils/memutils.h"
}

namespace {

// The header of a row put back, as read under ACCESS EXCLUSIVE: alive to a snapshot taken then,
// so its xmin committed and its xmax (if any) is a locker's or an aborted transaction's, all
// ended: that xmax is cleared, as VACUUM's freezing clears it (FreezeMultiXactId, a locker gone),
// and nothing that a snapshot can tell changes. xmin is kept, and frozen only when it precedes
// frozen_xid (visible to every snapshot): a snapshot taken before the row's transaction committed
// still does not see it.
void keep_visibility(HeapTupleHeader header, TransactionId frozen_xid)
{
    if (!(header->t_infomask & HEAP_XMAX_INVALID) || TransactionIdIsValid(HeapTupleHeaderGetRawXmax(header))) {
        header->t_infomask &= ~HEAP_XMAX_BITS;
        header->t_infomask |= HEAP_XMAX_INVALID;
        header->t_infomask2 &= ~HEAP_KEYS_UPDATED;
        HeapTupleHeaderSetXmax(header, InvalidTransactionId);
    }
    // Not part of an update chain any more, as rewrite_heap_tuple clears it: each row is alone in
    // the new file (an index entry for a heap-only tuple would find no root to follow).
    header->t_infomask2 &= ~HEAP2_XACT_MASK;
    TransactionId xmin = HeapTupleHeaderGetXmin(header);  // FrozenTransactionId once frozen
    if (TransactionIdIsNormal(xmin) && TransactionIdPrecedes(xmin, frozen_xid))
        HeapTupleHeaderSetXminFrozen(header);
}

// The page being filled, pinned and locked.
struct PageWriter {
    Relation rel;
    Buffer buffer;
    Size keep_free;  // the table's fillfactor, as rewriteheap.c leaves it free
};

void finish_page(PageWriter& writer)
{
    if (!BufferIsValid(writer.buffer))
        return;
    START_CRIT_SECTION();
    MarkBufferDirty(writer.buffer);
    if (RelationNeedsWAL(writer.rel))
        log_newpage_buffer(writer.buffer, true);
    END_CRIT_SECTION();
    UnlockReleaseBuffer(writer.buffer);
    writer.buffer = InvalidBuffer;
}

void add_row(PageWriter& writer, HeapTuple row)
{
    Size length = MAXALIGN(row->t_len);
    if (length > MaxHeapTupleSize)
        ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                        errmsg("jobbuf: storage rotation: a row of %zu bytes does not fit a page", length)));
    if (BufferIsValid(writer.buffer)) {
        Page page = BufferGetPage(writer.buffer);
        bool room = PageGetHeapFreeSpace(page) >= length + writer.keep_free ||
                    (PageGetMaxOffsetNumber(page) == 0 && PageGetHeapFreeSpace(page) >= length);
        if (!room)
            finish_page(writer);
    }
    if (!BufferIsValid(writer.buffer)) {
        writer.buffer = jobbuf_new_locked_buffer(writer.rel);
        PageInit(BufferGetPage(writer.buffer), BufferGetPageSize(writer.buffer), 0);
    }
    RelationPutHeapTuple(writer.rel, writer.buffer, row, false);
}

}  // namespace

uint64 out_of_line_bytes(Relation rel, HeapTuple tuple)
{
    if (!HeapTupleHasExternal(tuple))
        return 0;
    TupleDesc desc = RelationGetDescr(rel);
    uint64 bytes = 0;
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute attribute = TupleDescAttr(desc, i);
        if (attribute->attisdropped || attribute->attlen != -1)
            continue;
        bool is_null;
        Datum value = heap_getattr(tuple, i + 1, desc, &is_null);
        if (!is_null && VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(value)))
            bytes += toast_datum_size(value);
    }
    return bytes;
}

void flatten_row(Relation rel, HeapTuple* tuple)
{
    if (!HeapTupleHasExternal(*tuple))
        return;
    HeapTuple flat = toast_flatten_tuple(*tuple, RelationGetDescr(rel));
    heap_freetuple(*tuple);
    *tuple = flat;
}

void put_back_rows(Relation rel, HeapTuple* rows, uint64 count, TransactionId frozen_xid, bool toast_rotated)
{
    PageWriter writer{rel, InvalidBuffer, static_cast<Size>(RelationGetTargetPageFreeSpace(rel, HEAP_DEFAULT_FILLFACTOR))};
    MemoryContext row_cxt = AllocSetContextCreate(CurrentMemoryContext, "jobbuf put back", ALLOCSET_DEFAULT_SIZES);
    for (uint64 i = 0; i < count; i++) {
        HeapTuple row = rows[i];
        keep_visibility(row->t_data, frozen_xid);
        MemoryContext caller_cxt = MemoryContextSwitchTo(row_cxt);
        // Only a flattened row can be too long (a row read with its TOAST pointers fitted its page);
        // the TOAST table then has a new file and the value goes there, keeping the row's header.
        if (toast_rotated && !HeapTupleHasExternal(row) && row->t_len > TOAST_TUPLE_THRESHOLD)
            row = heap_toast_insert_or_update(rel, row, nullptr, HEAP_INSERT_SKIP_FSM | HEAP_INSERT_NO_LOGICAL);
        add_row(writer, row);
        MemoryContextSwitchTo(caller_cxt);
        MemoryContextReset(row_cxt);
    }
    finish_page(writer);
    MemoryContextDelete(row_cxt);
}
