// Postgres regime: the worker's word about held jobs (jobs whose owner is another installation:
// restored from a dump, copied by CREATE DATABASE ... TEMPLATE, applied by logical replication;
// installation_identity.h). The census (queue_census.h) counts them with every queue's other
// jobs; this says so in one WARNING when some appear, and in one LOG when none are left. Held
// jobs discarded because a job of this installation took their unique_key (62_held_keys.sql)
// are counted from jobbuf.held_discards in a LOG line of the same family.
#pragma once
#include "pg_includes.h"

// The census counted held jobs in queues: logs a change between none and some.
void note_held_count(int64 held, int64 queues);

// In the census's transaction (SPI connected, jobbuf.held_discards locked): deletes the rows of
// jobbuf.held_discards and logs how many held jobs they name, in how many queues.
void note_held_discards(void);
