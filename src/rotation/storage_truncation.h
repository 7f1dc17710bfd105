// Postgres regime: the TRUNCATE step of a storage rotation (storage_rotation.cpp), done the way
// TRUNCATE does it but without rebuilding what holds nothing. Every relation that gets a new
// file writes a pg_class row version; under the held snapshot that rotation exists for, none of
// those versions can be removed, and each later catalog update or lookup of that relation walks
// all of them. jobbuf.jobs has seven indexes and a TOAST table, and most deployments use three
// of those ten relations (no claims, partitions, unique keys or large payloads): the others
// keep their files.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "utils/rel.h"
}

// Takes ACCESS EXCLUSIVE on rel's TOAST table, that table's indexes and each index of rel, each
// with ConditionalLockRelationOid: never joins a lock queue while the caller holds rel's own
// ACCESS EXCLUSIVE (waiting for a VACUUM of the TOAST table would stall every producer behind
// rel's lock). False when one of them is not free: the caller then gives up before changing
// anything, and the end of its transaction releases those taken.
bool lock_storage_without_waiting(Relation rel);

// Empties rel, a plain table on which the caller holds ACCESS EXCLUSIVE, as on everything
// lock_storage_without_waiting locks, inside the caller's transaction: the table gets a new file, as do its TOAST table and each index, except a TOAST
// table that has never stored anything and a B-tree index that has never had an entry (its file
// is its metapage alone: it names no row of the old file). refills_toast: a row the caller puts
// back is long enough for the TOAST table (TOAST_TUPLE_THRESHOLD), which then gets a new file
// even when empty: rows are put back frozen, which is safe only in a file this transaction made.
// Like TRUNCATE it checks serializable readers, resets the table's row counts in the statistics
// and, with wal_level = logical, writes the TRUNCATE record that logical decoding turns into the
// subscribers' TRUNCATE.
void truncate_storage(Relation rel, bool refills_toast);
