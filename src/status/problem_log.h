// Postgres regime: logs each worker problem once when it starts (a changed description of an
// ongoing problem at most once a minute), and one LOG line when it ends: no log spam while
// Redis is down, however long the outage and however many retries.
#pragma once
#include "pg_includes.h"

// Settings: a Redis setting that cannot be used (refused, unreadable password file); RedisMemory,
// RedisEviction, RedisInfo: the memory guard's (a Redis at jobbuf.redis_memory_limit, one that
// evicts, one that refuses INFO; delivery/memory_room.h); Target: a queue whose target the Redis
// in use cannot carry (a Cluster); Lease: another cluster holds the delivery lease (its own kind, so
// that an earlier Redis problem, a connection the other fenced, does not delay its one WARNING).
enum class ProblemKind { Redis, Database, Config, Settings, RedisMemory, RedisEviction, RedisInfo, Lease, Target };
constexpr int kProblemKinds = static_cast<int>(ProblemKind::Target) + 1;  // keep Target last

// Reports a problem at WARNING (see above); always recorded in jobbuf_worker_status().last_error.
void report_problem(ProblemKind kind, const char* message);

// Reports that a kind of problem is over: one LOG line if it was being reported; last_error then
// shows a problem that still lasts, or nothing (last_error_at keeps when the last one was seen).
void report_recovered(ProblemKind kind, const char* message);

// Shows the problem that still lasts in jobbuf_worker_status().last_error (nothing when none
// does): called when a problem kept elsewhere (a queue's, queue_failures.h) ends.
void show_lasting_problem(void);
