// Postgres regime: which queues a full pass looks at. Not every active queue (10,000 of them cost
// 10,000 batch transactions a poll_interval), only those that hold jobs: waiting or scheduled
// ones, held ones, and claimed ones (whose claims may have expired), found by skipping from
// queue to queue along jobs_waiting and jobs_leased. The cost is one index probe per such queue.
#pragma once
#include "pg_includes.h"

// Marks the queues that hold jobs as pending (want_queue_named), in its own transaction. False
// when jobbuf's tables are locked (DDL): the caller then looks at every queue.
bool mark_queues_with_jobs(void);
