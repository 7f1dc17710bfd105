// Postgres regime: how a storage rotation writes the rows it keeps into the table's new heap file
// (storage_rotation.cpp): tuple headers kept as CLUSTER's rewrite keeps them, out-of-line values
// left where they are unless the TOAST table was rotated too. See docs/internals/rotation.md.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "access/htup.h"
#include "utils/rel.h"
}

// The bytes rel's row keeps out of line (its TOAST pointers' stored sizes), read without
// detoasting anything.
uint64 out_of_line_bytes(Relation rel, HeapTuple tuple);

// Replaces *tuple, a row read from rel's current heap, by a copy whose out-of-line values are
// inline (toast_flatten_tuple): for a rotation that gives the TOAST table a new file too, before
// the old one is left.
void flatten_row(Relation rel, HeapTuple* tuple);

// Writes rows into rel's new, empty heap file (give_new_heap_file), page by page through shared
// buffers, each page WAL-logged whole (log_newpage_buffer, as index builds do; logical decoding
// decodes none). Each row keeps its tuple header (xmin, and frozen only before frozen_xid; a
// locker's or aborted xmax cleared); a row whose TOAST pointers name the kept TOAST table keeps
// them as they are. When toast_rotated (the TOAST table has a new file too, and the rows were
// flattened), a row too long for a page is toasted into it as CLUSTER re-toasts
// (HEAP_INSERT_NO_LOGICAL); otherwise nothing is written to the TOAST table.
void put_back_rows(Relation rel, HeapTuple* rows, uint64 count, TransactionId frozen_xid, bool toast_rotated);
