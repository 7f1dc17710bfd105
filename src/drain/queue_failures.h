// Postgres regime: one queue's persistent Postgres error costs that queue alone. A batch (or
// group) of a queue that raises an error backs that queue off (1 s, doubling up to 30 s) while
// the other queues keep draining; the problem is logged once per queue and distinct text (one
// WARNING when it starts, one LOG when it ends) and shown in jobbuf_worker_status().last_error.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "utils/timestamp.h"
}

// A batch of queue raised message: the queue waits out its backoff, the others go on.
void queue_failed(const char* queue, const char* message);

// A batch of queue ran without an error: its problem, if it had one, is over (one LOG line).
void queue_succeeded(const char* queue);

// Whether queue is backing off after an error at now.
bool queue_backing_off(const char* queue, TimestampTz now);

// The earliest time after now that a backed-off queue may be tried again; 0 when none.
TimestampTz next_queue_retry(TimestampTz now);

// The queue list was reloaded (a queue changed: maybe the one that failed): every backing-off
// queue may be tried again at once; a queue that fails again keeps doubling its backoff.
void retry_failing_queues_now(void);
