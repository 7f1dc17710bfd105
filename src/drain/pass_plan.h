// Postgres regime: when the drain worker's passes look at every queue. Most passes look only at
// the queues that commits staged into (Changed); every poll_interval a Full pass restarts each
// cursor at its queue's floor (run_at coming due, rows another transaction held), and a Head
// pass restarts them at 0 (released claims, two-phase commits below a cursor). See
// queue_progress.h for the cursors themselves.
#pragma once
#include "pg_includes.h"

enum class PassKind {
    Changed,  // the queues commits staged into, each from its cursor
    Full,     // every queue, each cursor restarted at its floor
    Head,     // every queue, each cursor restarted at 0
};

// The next pass's kind, restarting the cursors for a Full or Head pass. first: the round's first
// pass (a round that did not finish makes the next round's first pass a full one).
PassKind start_pass(bool first);

// A round begins: until it finishes (round_finished), the next round's first pass is full.
void round_started(void);

// The round finished; locked_out: some queue's tables were locked, so the next round's first
// pass looks at every queue again.
void round_finished(bool locked_out);

// Spaces full and head passes out when the first batches of their restarted cursors took
// take_us to find their first job (dead rows that an old snapshot keeps).
void note_restart_scan(int64 take_us, bool from_head);
