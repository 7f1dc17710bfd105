// Postgres regime: what DROP EXTENSION jobbuf throws away, said once it did. Postgres users
// expect the drop to succeed, as for any extension, but the jobs still staged go with it: one
// WARNING per queue that held jobs, with its counts of waiting, scheduled, claimed and held jobs.
// The counts are read before the drop (afterwards the tables are gone) and reported only after it
// succeeded, so a refused DROP says nothing.
#pragma once
#include "pg_includes.h"

struct DroppedJobs;

// The jobs a DROP EXTENSION naming jobbuf is about to discard, or nullptr when the statement is
// not one or nothing is staged. Reads jobbuf.jobs in the caller's transaction.
DroppedJobs* jobs_before_drop(Node* statement);

// The WARNINGs for what the drop discarded (nothing when dropped is nullptr).
void warn_dropped_jobs(const DroppedJobs* dropped);
