// Postgres regime: wakes the drain worker when a transaction that staged jobs commits.
#pragma once

// Marks the current transaction as having staged jobs (called by the jobs trigger).
void note_jobs_staged(void);

// Registers the transaction callback; called once per process from _PG_init.
void register_commit_wakeup(void);
