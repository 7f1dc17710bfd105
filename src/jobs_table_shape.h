// Postgres regime: whether jobbuf.jobs is still exactly as the extension created it. The direct
// paths that bypass SQL (the staging insert, the drain's take) rely on it: a table whose owner
// added triggers, rules, row security or changed columns gets the SQL statements instead, so
// that everything the owner added keeps working.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "utils/rel.h"
}

// Opens jobbuf.jobs with RowExclusiveLock and sets *companion_oid to the jobbuf relation named
// companion (its sequence, an index). nullptr, with nothing opened, when either is missing.
Relation open_jobs_table(const char* companion, Oid* companion_oid);

// True when rel (jobbuf.jobs) is a plain table with no rules and no row security, whose only
// trigger is the extension's validation trigger (enabled as created), and whose columns have the
// extension's names and types.
bool jobs_table_is_pristine(Relation rel);
