// Postgres regime: jobbuf_stage's insert path. It forms the row itself, validates it like the
// jobs trigger does, and stores it with the table AM and the index AM directly: no SQL statement,
// no executor start-up, no trigger call per job, so staging costs about what the INSERT alone
// costs. Permissions are checked as for INSERT (queue, payload, run_at, unique_key,
// partition_key) ... RETURNING id, and the sequence as nextval() checks it.
//
// Taken only while jobbuf.jobs is as the extension created it (its one trigger is the validation
// trigger and fires, no rules, no row security, the extension's columns and types, no deferrable
// unique index): a table changed by its owner, or session_replication_role = replica, gets the
// SQL path (stage_function.cpp) instead. Column defaults are the extension's on this path. The
// foreign key jobs (queue) -> queues (name) is not checked here (the queue is validated like the
// trigger does, under this path's lock on jobbuf.jobs), whether or not its owner enabled the key's
// check on INSERT, which the extension creates disabled (00_schema.sql).
#pragma once
#include "pg_includes.h"

struct JobInserter;

// Opens jobbuf.jobs and its indexes for a series of inserts in this transaction; nullptr when the
// table is not in the shape described above. The privileges checked are those of inserting
// (queue, payload, run_at, unique_key, partition_key), or (queue, payload) only.
JobInserter* job_inserter_open(bool all_staging_columns);

// Stages one validated job (queue_name is queue as a C string) and returns its id. run_at and
// partition_key may be nullptr (NULL: run now; no partition).
int64 job_inserter_insert(JobInserter* inserter, text* queue, const char* queue_name, Datum payload,
                          const Datum* run_at, const Datum* partition_key);

void job_inserter_close(JobInserter* inserter);
