// Postgres regime: the shape check of jobbuf.jobs (see jobs_table_shape.h).
#include "pg_includes.h"

#include "job_validation.h"
#include "jobs_table_shape.h"

extern "C" {
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "utils/lsyscache.h"
}

namespace {

struct JobsColumnShape {
    const char* name;
    Oid type;
    bool not_null;
};
const JobsColumnShape kColumns[kJobsColumns] = {
    {"id", INT8OID, true},           {"queue", TEXTOID, true},         {"payload", JSONBOID, true},
    {"run_at", TIMESTAMPTZOID, true}, {"unique_key", TEXTOID, false},  {"partition_key", TEXTOID, false},
    {"staged_at", TIMESTAMPTZOID, true}, {"attempts", INT4OID, true},  {"last_error", TEXTOID, false},
    {"group_id", UUIDOID, false},    {"lease_until", TIMESTAMPTZOID, false},
};

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
    TriggerDesc* triggers = rel->trigdesc;
    if (triggers == nullptr || triggers->numtriggers != 1 ||
        strcmp(triggers->triggers[0].tgname, "jobs_validate_and_wake") != 0 ||
        triggers->triggers[0].tgenabled != TRIGGER_FIRES_ON_ORIGIN)
        return false;
    char* trigger_function = get_func_name(triggers->triggers[0].tgfoid);
    if (trigger_function == nullptr || strcmp(trigger_function, "staged_job_trigger") != 0)
        return false;
    TupleDesc desc = RelationGetDescr(rel);
    if (desc->natts != kJobsColumns)
        return false;
    for (int i = 0; i < kJobsColumns; i++) {
        Form_pg_attribute column = TupleDescAttr(desc, i);
        if (column->attisdropped || column->attgenerated || column->atttypid != kColumns[i].type ||
            (kColumns[i].not_null && !column->attnotnull) ||
            strcmp(NameStr(column->attname), kColumns[i].name) != 0)
            return false;
    }
    return true;
}
