// Postgres regime: whether jobbuf.jobs is still exactly as the extension created it. The direct
// paths that bypass SQL (the staging insert, the drain's take) rely on it: a table whose owner
// added triggers, rules, row security or changed columns gets the SQL statements instead, so
// that everything the owner added keeps working.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "utils/rel.h"
}

// True when rel (jobbuf.jobs) is a plain table with no rules and no row security, whose only
// trigger is the extension's validation trigger (enabled as created), and whose columns have the
// extension's names and types.
bool jobs_table_is_pristine(Relation rel);
