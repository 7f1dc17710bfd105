// Postgres regime: the storage steps of a storage rotation (see storage_truncation.h).
#include "pg_includes.h"

#include "pg_compat.h"
#include "rotation/storage_truncation.h"

extern "C" {
#include "access/table.h"
#include "catalog/catalog.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/predicate.h"
#include "utils/lsyscache.h"
#include "utils/relcache.h"
}

namespace {

// A B-tree whose file is its metapage alone: no entry was ever added since it was built. The
// caller holds ACCESS EXCLUSIVE on it (lock_storage_without_waiting).
bool index_never_used(Oid index_oid)
{
    Relation index = index_open(index_oid, NoLock);
    bool never_used = index->rd_rel->relam == BTREE_AM_OID && RelationGetNumberOfBlocks(index) <= 1;
    index_close(index, NoLock);
    return never_used;
}

// New files for rel's indexes, built from rel's heap, except those that never had an entry. Like
// TRUNCATE (reindex_relation), an invalid index of a TOAST table is left alone: REINDEX refuses
// it (one is left behind by a REINDEX CONCURRENTLY that was cancelled), and nothing reads it.
void rebuild_indexes(Relation rel, bool is_toast)
{
    List* indexes = RelationGetIndexList(rel);
    ListCell* cell;
    foreach (cell, indexes) {
        Oid index = lfirst_oid(cell);
        if (is_toast && !get_index_isvalid(index))
            continue;
        if (!index_never_used(index))
            jobbuf_reindex_index(index, rel->rd_rel->relpersistence);
    }
    list_free(indexes);
}

// ACCESS EXCLUSIVE on each index of rel, none waited for.
bool lock_indexes_without_waiting(Relation rel)
{
    List* indexes = RelationGetIndexList(rel);
    bool all = true;
    ListCell* cell;
    foreach (cell, indexes) {
        if (!ConditionalLockRelationOid(lfirst_oid(cell), AccessExclusiveLock)) {
            all = false;
            break;
        }
    }
    list_free(indexes);
    return all;
}

}  // namespace

bool lock_storage_without_waiting(Relation rel, bool with_toast)
{
    Oid toast_oid = rel->rd_rel->reltoastrelid;
    if (with_toast && OidIsValid(toast_oid)) {
        if (!ConditionalLockRelationOid(toast_oid, AccessExclusiveLock))
            return false;
        Relation toast = table_open(toast_oid, NoLock);
        bool toast_indexes = lock_indexes_without_waiting(toast);
        table_close(toast, NoLock);
        if (!toast_indexes)
            return false;
    }
    return lock_indexes_without_waiting(rel);
}

void give_new_heap_file(Relation rel, bool with_toast)
{
    // cluster_rel's first step: a serializable reader's lock on a row or page of the old file
    // would name another row, or none, in the new one; held on the relation, it still conflicts
    // with the writes that follow. (TRUNCATE's CheckTableForSerializableConflictIn instead treats
    // the truncating transaction as a writer of every row: a rotation writes none.)
    TransferPredicateLocksToHeapRelation(rel);
    jobbuf_set_new_relfilenumber(rel);
    Oid toast_oid = rel->rd_rel->reltoastrelid;
    if (with_toast && OidIsValid(toast_oid)) {
        Relation toast = table_open(toast_oid, NoLock);  // locked by lock_storage_without_waiting
        if (RelationGetNumberOfBlocks(toast) > 0) {
            jobbuf_set_new_relfilenumber(toast);
            rebuild_indexes(toast, true);
        }
        table_close(toast, NoLock);
    }
}

void rebuild_used_indexes(Relation rel)
{
    rebuild_indexes(rel, false);
}
