// Postgres regime: the few server calls whose shape differs between the PostgreSQL majors jobbuf
// builds against (15, 17, 18, 19), each behind one named helper, so that no logic
// file carries a version test. Include it after pg_includes.h. What changed, and in which major:
//  * 16: pg_database_ownercheck() and pg_extension_ownercheck() became object_ownercheck();
//  * 16: a range table entry's permissions moved to RTEPermissionInfo: ExecCheckRTPerms() became
//        ExecCheckPermissions(), and ExecInitRangeTable() takes the permission list;
//  * 16: ExecInsertIndexTuples() takes onlySummarizing (false: a plain insert updates every index);
//  * 16: get_guc_variables() returns the number of settings (GetNumConfigOptions() is gone);
//  * 16: RelationSetNewRelfilenode() became RelationSetNewRelfilenumber();
//  * 17: reindex_index() takes the REINDEX statement (none here) first;
//  * 18: ExecInitRangeTable() takes the unpruned range table indexes (all of them here), and
//        index_beginscan() the scan's instrumentation (none here);
//  * 19: ExecInsertIndexTuples() takes its options as flags (EIIT_*) before the slot,
//        index_beginscan() and table_beginscan() take scan options (SO_*: none here),
//        table_tuple_delete() its options (TABLE_DELETE_*: none here) before the snapshot instead
//        of changingPart after; a setting's type-specific fields became a union inside
//        config_generic (before, each type's struct began with a config_generic), and
//        config_enum_lookup_by_value() takes the config_generic; postgres.h no longer includes
//        varatt.h (16 split it out of postgres.h); a signal handler (SIGNAL_ARGS) also gets the
//        signal's pg_signal_info.
#pragma once

extern "C" {
#include "access/genam.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "executor/executor.h"
#include "nodes/bitmapset.h"
#include "nodes/parsenodes.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/guc_tables.h"
#include "utils/rel.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif
}

// Whether role owns (or, being a superuser, may act as owner of) the database.
static inline bool jobbuf_database_owned_by(Oid database, Oid role)
{
#if PG_VERSION_NUM >= 160000
    return object_ownercheck(DatabaseRelationId, database, role);
#else
    return pg_database_ownercheck(database, role);
#endif
}

// Whether role owns (or, being a superuser, may act as owner of) the extension.
static inline bool jobbuf_extension_owned_by(Oid extension, Oid role)
{
#if PG_VERSION_NUM >= 160000
    return object_ownercheck(ExtensionRelationId, extension, role);
#else
    return pg_extension_ownercheck(extension, role);
#endif
}

// The range table of a statement on one relation (entry 1) and the permissions it needs.
struct JobbufRangeTable {
    List* entries;
    List* permissions;  // RTEPermissionInfo from 16 on; NIL before (they live in the entry)
};

static inline JobbufRangeTable jobbuf_relation_range_table(Relation rel, LOCKMODE lockmode, AclMode required,
                                                           Bitmapset* inserted_columns, Bitmapset* selected_columns)
{
    RangeTblEntry* rte = makeNode(RangeTblEntry);
    rte->rtekind = RTE_RELATION;
    rte->relid = RelationGetRelid(rel);
    rte->relkind = rel->rd_rel->relkind;
    rte->rellockmode = lockmode;
    JobbufRangeTable table = {list_make1(rte), NIL};
#if PG_VERSION_NUM >= 160000
    RTEPermissionInfo* permission = makeNode(RTEPermissionInfo);
    permission->relid = rte->relid;
    permission->inh = false;
    permission->requiredPerms = required;
    permission->insertedCols = inserted_columns;
    permission->selectedCols = selected_columns;
    rte->perminfoindex = 1;
    table.permissions = list_make1(permission);
#else
    rte->requiredPerms = required;
    rte->insertedCols = inserted_columns;
    rte->selectedCols = selected_columns;
#endif
    return table;
}

// Raises the executor's permission error when the current user lacks what the table needs.
static inline void jobbuf_check_permissions(JobbufRangeTable table)
{
#if PG_VERSION_NUM >= 160000
    ExecCheckPermissions(table.entries, table.permissions, true);
#else
    ExecCheckRTPerms(table.entries, true);
#endif
}

static inline void jobbuf_init_range_table(EState* estate, JobbufRangeTable table)
{
#if PG_VERSION_NUM >= 180000
    ExecInitRangeTable(estate, table.entries, table.permissions, bms_add_range(nullptr, 1, list_length(table.entries)));
#elif PG_VERSION_NUM >= 160000
    ExecInitRangeTable(estate, table.entries, table.permissions);
#else
    ExecInitRangeTable(estate, table.entries);
#endif
}

// The index entries of a tuple just inserted (not an update, no ON CONFLICT).
static inline void jobbuf_insert_index_tuples(ResultRelInfo* result_rel, TupleTableSlot* slot, EState* estate)
{
#if PG_VERSION_NUM >= 190000
    ExecInsertIndexTuples(result_rel, estate, 0, slot, NIL, nullptr);
#elif PG_VERSION_NUM >= 160000
    ExecInsertIndexTuples(result_rel, slot, estate, false, false, nullptr, NIL, false);
#else
    ExecInsertIndexTuples(result_rel, slot, estate, false, false, nullptr, NIL);
#endif
}

// Deletes the tuple at tid as command cid if snapshot sees it and nobody holds it (no waiting,
// no cross-check snapshot, not a partition move); TM_Ok when it did.
static inline TM_Result jobbuf_tuple_delete(Relation rel, ItemPointer tid, CommandId cid, Snapshot snapshot,
                                            TM_FailureData* failure)
{
#if PG_VERSION_NUM >= 190000
    return table_tuple_delete(rel, tid, cid, 0, snapshot, InvalidSnapshot, false, failure);
#else
    return table_tuple_delete(rel, tid, cid, snapshot, InvalidSnapshot, false, failure, false);
#endif
}

// Every setting the server knows, and how many there are.
static inline struct config_generic** jobbuf_guc_variables(int* count)
{
#if PG_VERSION_NUM >= 160000
    return get_guc_variables(count);
#else
    *count = GetNumConfigOptions();
    return get_guc_variables();
#endif
}

// The type-specific fields of a setting, by its vartype.
#if PG_VERSION_NUM >= 190000
static inline config_bool* jobbuf_guc_bool(config_generic* var)
{
    return &var->_bool;
}
static inline config_int* jobbuf_guc_int(config_generic* var)
{
    return &var->_int;
}
static inline config_real* jobbuf_guc_real(config_generic* var)
{
    return &var->_real;
}
static inline config_string* jobbuf_guc_string(config_generic* var)
{
    return &var->_string;
}
static inline config_enum* jobbuf_guc_enum(config_generic* var)
{
    return &var->_enum;
}
#else
static inline config_bool* jobbuf_guc_bool(config_generic* var)
{
    return reinterpret_cast<config_bool*>(var);
}
static inline config_int* jobbuf_guc_int(config_generic* var)
{
    return reinterpret_cast<config_int*>(var);
}
static inline config_real* jobbuf_guc_real(config_generic* var)
{
    return reinterpret_cast<config_real*>(var);
}
static inline config_string* jobbuf_guc_string(config_generic* var)
{
    return reinterpret_cast<config_string*>(var);
}
static inline config_enum* jobbuf_guc_enum(config_generic* var)
{
    return reinterpret_cast<config_enum*>(var);
}
#endif

// The name of an enum setting's value.
static inline const char* jobbuf_guc_enum_name(config_generic* var, int value)
{
#if PG_VERSION_NUM >= 190000
    return config_enum_lookup_by_value(var, value);
#else
    return config_enum_lookup_by_value(jobbuf_guc_enum(var), value);
#endif
}

// A sequential scan of rel under snapshot, without scan options (19 added them).
static inline TableScanDesc jobbuf_table_beginscan(Relation rel, Snapshot snapshot)
{
#if PG_VERSION_NUM >= 190000
    return table_beginscan(rel, snapshot, 0, nullptr, SO_NONE);
#else
    return table_beginscan(rel, snapshot, 0, nullptr);
#endif
}

// An index scan of heap through index, without EXPLAIN instrumentation (18 added that argument)
// and without scan options (19 added those).
static inline IndexScanDesc jobbuf_index_beginscan(Relation heap, Relation index, Snapshot snapshot, int nkeys,
                                                   int norderbys)
{
#if PG_VERSION_NUM >= 190000
    return index_beginscan(heap, index, snapshot, nullptr, nkeys, norderbys, SO_NONE);
#elif PG_VERSION_NUM >= 180000
    return index_beginscan(heap, index, snapshot, nullptr, nkeys, norderbys);
#else
    return index_beginscan(heap, index, snapshot, nkeys, norderbys);
#endif
}

// Gives rel a new, empty file, the old one dropped at commit (TRUNCATE's way).
static inline void jobbuf_set_new_relfilenumber(Relation rel)
{
#if PG_VERSION_NUM >= 160000
    RelationSetNewRelfilenumber(rel, rel->rd_rel->relpersistence);
#else
    RelationSetNewRelfilenode(rel, rel->rd_rel->relpersistence);
#endif
}

// Rebuilds an index into a new file from its table, as TRUNCATE does (quietly, leaving the
// index's pg_index flags as they are).
static inline void jobbuf_reindex_index(Oid index, char persistence)
{
    ReindexParams params = {};
#if PG_VERSION_NUM >= 170000
    reindex_index(nullptr, index, true, persistence, &params);
#else
    reindex_index(index, true, persistence, &params);
#endif
}

// A new page at the end of rel's main fork, zeroed, pinned and locked exclusively.
static inline Buffer jobbuf_new_locked_buffer(Relation rel)
{
#if PG_VERSION_NUM >= 160000
    return ExtendBufferedRel(BMR_REL(rel), MAIN_FORKNUM, nullptr, EB_LOCK_FIRST);
#else
    Buffer buffer = ReadBuffer(rel, P_NEW);
    LockBuffer(buffer, BUFFER_LOCK_EXCLUSIVE);
    return buffer;
#endif
}

// A signal handler's arguments (SIGNAL_ARGS) passed on to another handler, such as die().
#if PG_VERSION_NUM >= 190000
#define JOBBUF_SIGNAL_ARGS_PASSED postgres_signal_arg, pg_siginfo
#else
#define JOBBUF_SIGNAL_ARGS_PASSED postgres_signal_arg
#endif
