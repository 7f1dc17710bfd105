// Postgres regime: queues whose target the Redis deployment cannot take (on a Redis Cluster:
// sidekiq, celery, a bullmq queue without a {hash tag}). jobbuf_create_queue refuses them, but a
// later change of jobbuf.redis_url can put an existing one there: its jobs then stay staged.
#pragma once
#include "pg_includes.h"

#include "drain/active_queues.h"
#include "redis/drain_session.h"

// Whether the worker must leave q's jobs staged.
bool target_refused(const jobbuf::redis::DrainSession* session, const ActiveQueue* q);

// Says which queues of the list are refused: one WARNING naming them (again when that set
// changes), jobbuf_worker_status().last_error, and each one's jobbuf_stats() row (last_error,
// written in a transaction of its own when the set changes); one LOG when none is left. May
// raise an ERROR (the caller guards it).
void note_refused_targets(const jobbuf::redis::DrainSession* session, const ActiveQueue* queues, int nqueues);
