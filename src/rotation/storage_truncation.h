// Postgres regime: the storage steps of a storage rotation (storage_rotation.cpp), done the way
// CLUSTER's rewrite does them (cluster.c, rewriteheap.c) but without rebuilding what holds
// nothing. Every relation that gets a new file writes a pg_class row version; under the held
// snapshot that rotation exists for, none of those versions can be removed, and each later
// catalog update or lookup of that relation walks all of them. jobbuf.jobs has seven indexes and
// a TOAST table, and most deployments use three of those ten relations (no claims, partitions,
// unique keys or large payloads): the others keep their files.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "utils/rel.h"
}

// Takes ACCESS EXCLUSIVE on each index of rel and, with_toast, on rel's TOAST table and that
// table's indexes, each with ConditionalLockRelationOid: never joins a lock queue while the caller holds rel's own
// ACCESS EXCLUSIVE (waiting for a VACUUM of the TOAST table would stall every producer behind
// rel's lock). False when one of them is not free: the caller then gives up before changing
// anything, and the end of its transaction releases those taken.
bool lock_storage_without_waiting(Relation rel, bool with_toast);

// Gives rel, a plain table on which the caller holds ACCESS EXCLUSIVE, as on everything
// lock_storage_without_waiting locks, a new, empty heap file inside the caller's transaction, the
// old one dropped at commit; so does its TOAST table (its indexes rebuilt empty) when with_toast
// (locked by lock_storage_without_waiting with it), unless it has never stored anything: without,
// the TOAST table and the values in it stay where they are. rel's indexes keep their files until rebuild_used_indexes. First, as
// CLUSTER does, the SIREAD locks of serializable transactions on rel's rows and pages move to the
// relation: they named places in the old file. Nothing of this is decoded by logical decoding
// (no TRUNCATE record: a rotation replicates as nothing).
void give_new_heap_file(Relation rel, bool with_toast);

// Rebuilds each index of rel from rel's heap into a new file (reindex_index, which also moves the
// index's SIREAD locks to the relation), except a B-tree that has never had an entry: its file is
// its metapage alone, so no row of the table belongs in it.
void rebuild_used_indexes(Relation rel);
