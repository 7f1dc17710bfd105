// Postgres regime: the drain worker's part of periodic jobs. Between its rounds, when a schedule
// is due (or jobbuf.schedules changed), the worker calls jobbuf.stage_due_ticks() in a
// transaction of its own: each due tick is staged as a job of its schedule's queue in the same
// transaction that advances the schedule, so it is staged once through any crash. It runs while
// delivery is disabled or Redis is down too; never on a standby.
#pragma once
#include "pg_includes.h"

// Stages the due ticks when one is due or the schedules changed; outside any transaction.
void stage_due_ticks_if_due(void);

// Milliseconds until the next tick is due (0: now); poll_interval when no schedule is known.
long ticks_due_in_ms(void);
