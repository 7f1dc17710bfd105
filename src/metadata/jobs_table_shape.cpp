// Postgres regime: the shape check of jobbuf.jobs (see jobs_table_shape.h).
#include "pg_includes.h"

#include "metadata/jobs_table_shape.h"

extern "C" {
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/relcache.h"
}

namespace {

struct JobsColumnShape {
    const char* name;
    Oid type;
    bool not_null;
};
const JobsColumnShape kColumns[kJobsColumns] = {
    {"id", INT8OID, true},
    {"queue", TEXTOID, true},
    {"payload", JSONBOID, true},
    {"run_at", TIMESTAMPTZOID, true},
    {"unique_key", TEXTOID, false},
    {"partition_key", TEXTOID, false},
    {"staged_at", TIMESTAMPTZOID, true},
    {"attempts", INT4OID, true},
    {"last_error", TEXTOID, false},
    {"group_id", UUIDOID, false},
    {"lease_until", TIMESTAMPTZOID, false},
    {"origin", UUIDOID, true},
    {"owner", UUIDOID, true},
    {"tick_id", INT8OID, false},
};
constexpr AttrNumber kQueuesName = 1;  // jobbuf.queues (name, ...)

bool columns_are_pristine(TupleDesc desc)
{
    if (desc->natts != kJobsColumns)
        return false;
    for (int i = 0; i < kJobsColumns; i++) {
        Form_pg_attribute column = TupleDescAttr(desc, i);
        if (column->attisdropped || column->attgenerated || column->atttypid != kColumns[i].type ||
            (kColumns[i].not_null && !column->attnotnull) || strcmp(NameStr(column->attname), kColumns[i].name) != 0)
            return false;
    }
    return true;
}

// The extension's foreign key jobs (queue) -> queues (name), in *constraint (InvalidOid under the
// 1.0 SQL, which has none). False when the table has any other foreign key.
bool foreign_keys_are_pristine(Relation rel, Oid* constraint)
{
    *constraint = InvalidOid;
    List* foreign_keys = RelationGetFKeyList(rel);
    if (foreign_keys == NIL)
        return true;
    if (list_length(foreign_keys) != 1)
        return false;
    auto* key = static_cast<ForeignKeyCacheInfo*>(linitial(foreign_keys));
    if (key->nkeys != 1 || key->conkey[0] != kJobsQueue || key->confkey[0] != kQueuesName ||
        key->confrelid != get_relname_relid("queues", RelationGetNamespace(rel)))
        return false;
    *constraint = key->conoid;
    return true;
}

// Whether trigger is the extension's trigger name calling function.
bool is_trigger(const Trigger& trigger, const char* name, const char* function)
{
    if (strcmp(trigger.tgname, name) != 0)
        return false;
    char* called = get_func_name(trigger.tgfoid);
    return called != nullptr && strcmp(called, function) == 0;
}

// One validation trigger, enabled as created; otherwise only the foreign key's own triggers
// (enabled or not: the extension disables its check on INSERT, an owner may enable it again) and
// the held-key trigger (62_held_keys.sql; enabled ALWAYS, or again as ORIGIN by a
// pg_restore --disable-triggers): it fires only for rows with a unique_key, which the direct
// insert path never stages.
bool triggers_are_pristine(Relation rel, Oid foreign_key)
{
    TriggerDesc* triggers = rel->trigdesc;
    if (triggers == nullptr)
        return false;
    int validation_triggers = 0;
    for (int i = 0; i < triggers->numtriggers; i++) {
        const Trigger& trigger = triggers->triggers[i];
        if (OidIsValid(foreign_key) && trigger.tgisinternal && trigger.tgconstraint == foreign_key &&
            (trigger.tgenabled == TRIGGER_FIRES_ON_ORIGIN || trigger.tgenabled == TRIGGER_DISABLED))
            continue;
        if ((trigger.tgenabled == TRIGGER_FIRES_ALWAYS || trigger.tgenabled == TRIGGER_FIRES_ON_ORIGIN) &&
            is_trigger(trigger, "jobs_yield_held_key", "held_key_yields"))
            continue;
        if (trigger.tgenabled != TRIGGER_FIRES_ON_ORIGIN)
            return false;
        if (!is_trigger(trigger, "jobs_validate_and_wake", "staged_job_trigger"))
            return false;
        validation_triggers++;
    }
    return validation_triggers == 1;
}

}  // namespace

Relation open_jobs_table(const char* companion, Oid* companion_oid)
{
    Oid schema = get_namespace_oid("jobbuf", true);
    if (!OidIsValid(schema))
        return nullptr;
    Oid jobs_oid = get_relname_relid("jobs", schema);
    *companion_oid = get_relname_relid(companion, schema);
    if (!OidIsValid(jobs_oid) || !OidIsValid(*companion_oid))
        return nullptr;
    return table_open(jobs_oid, RowExclusiveLock);
}

bool jobs_table_is_pristine(Relation rel)
{
    if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relrowsecurity || rel->rd_rel->relhasrules)
        return false;
    if (!columns_are_pristine(RelationGetDescr(rel)))
        return false;
    Oid foreign_key = InvalidOid;
    return foreign_keys_are_pristine(rel, &foreign_key) && triggers_are_pristine(rel, foreign_key);
}

AttrNumber jobs_column_number_if_present(TupleDesc desc, JobsColumn column)
{
    const JobsColumnShape& shape = kColumns[column - 1];
    // Starting at the extension's own position, the usual table costs one comparison per column.
    for (int i = 0; i < desc->natts; i++) {
        int at = (column - 1 + i) % desc->natts;
        Form_pg_attribute attribute = TupleDescAttr(desc, at);
        if (attribute->attisdropped || strcmp(NameStr(attribute->attname), shape.name) != 0)
            continue;
        if (attribute->atttypid != shape.type)
            ereport(
                ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("jobbuf: column \"%s\" of jobbuf.jobs is of type %s, not %s as the extension created it",
                        shape.name, format_type_be(attribute->atttypid), format_type_be(shape.type)),
                 errhint("jobbuf reads the column as %s: ALTER TABLE jobbuf.jobs ALTER COLUMN %s TYPE %s USING %s::%s",
                         format_type_be(shape.type), shape.name, format_type_be(shape.type), shape.name,
                         format_type_be(shape.type))));
        return static_cast<AttrNumber>(at + 1);
    }
    return InvalidAttrNumber;
}

AttrNumber jobs_column_number(TupleDesc desc, JobsColumn column)
{
    AttrNumber found = jobs_column_number_if_present(desc, column);
    if (found == InvalidAttrNumber) {
        const JobsColumnShape& shape = kColumns[column - 1];
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("jobbuf: jobbuf.jobs has no column \"%s\"", shape.name),
                        errhint("The extension created it as %s; jobbuf cannot stage jobs without it.",
                                format_type_be(shape.type))));
    }
    return found;
}
