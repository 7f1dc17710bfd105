// Postgres regime: the worker's word about held jobs (jobs whose owner is another installation:
// restored from a dump, copied by CREATE DATABASE ... TEMPLATE, applied by logical replication;
// installation_identity.h). It counts them whenever its queue list is reloaded (a commit that
// stages a held job asks for that) and says so in one WARNING when some appear, and in one LOG
// when none are left.
#pragma once
#include "pg_includes.h"

// Counts the held jobs, in its own transaction, and logs a change between none and some.
void note_held_jobs(void);
