// Postgres regime: logs each worker problem once when it starts (a changed description of an
// ongoing problem at most once a minute), and one LOG line when it ends: no log spam while
// Redis is down, however long the outage and however many retries.
#pragma once
#include "pg_includes.h"

enum class ProblemKind { Redis, Database, Config, Target };

// Reports a problem at WARNING (see above); always recorded in jobbuf_worker_status().last_error.
void report_problem(ProblemKind kind, const char* message);

// Reports that a kind of problem is over: one LOG line if it was being reported.
void report_recovered(ProblemKind kind, const char* message);
