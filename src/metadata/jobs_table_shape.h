// Postgres regime: whether jobbuf.jobs is still exactly as the extension created it. The direct
// paths that bypass SQL (the staging insert, the drain's take) rely on it: a table whose owner
// added triggers, rules, row security or changed columns gets the SQL statements instead, so
// that everything the owner added keeps working. The staging trigger, which runs on every table
// shape, finds the columns it reads by name and refuses a column whose type is not the extension's.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "utils/rel.h"
}

// Column numbers of jobbuf.jobs (see 00_schema.sql), 1-based.
enum JobsColumn {
    kJobsId = 1,
    kJobsQueue,
    kJobsPayload,
    kJobsRunAt,
    kJobsUniqueKey,
    kJobsPartitionKey,
    kJobsStagedAt,
    kJobsAttempts,
    kJobsLastError,
    kJobsGroupId,
    kJobsLeaseUntil,
    kJobsOrigin,
    kJobsOwner,   // 1.2
    kJobsTickId,  // 1.3
};
constexpr int kJobsColumns = kJobsTickId;

// Opens jobbuf.jobs with RowExclusiveLock and sets *companion_oid to the jobbuf relation named
// companion (its sequence, an index). nullptr, with nothing opened, when either is missing.
Relation open_jobs_table(const char* companion, Oid* companion_oid);

// True when rel (jobbuf.jobs) is a plain table with no rules and no row security, whose columns
// have the extension's names and types, whose only foreign key is the extension's own (queue
// references jobbuf.queues; 1.1, absent under the 1.0 SQL), and whose only triggers are the
// extension's validation trigger (enabled as created), its held-key trigger (1.3, rows with a
// unique_key only) and that foreign key's (its check on INSERT disabled as created, or enabled
// again by the owner).
bool jobs_table_is_pristine(Relation rel);

// The attribute number of the extension's column in desc (jobbuf.jobs as it is now, whatever its
// owner changed): the column of that name. ERROR, naming the column and how to restore it, when it
// is missing or its type is not the extension's.
AttrNumber jobs_column_number(TupleDesc desc, JobsColumn column);

// The same for a column that older versions' SQL lacks (1.2's origin and owner, between the
// restart that loads a new library and ALTER EXTENSION jobbuf UPDATE): InvalidAttrNumber when the
// table has no such column.
AttrNumber jobs_column_number_if_present(TupleDesc desc, JobsColumn column);
