// Postgres regime: how a process the launcher started takes its place: it connects to the
// database of its slot (bgw_main_arg: the slot index; bgw_extra: the database oid) and decides
// whether it stays. The probe (the launcher's extra slot) only reports whether the database has
// the extension; a drain worker in a database without it leaves quietly, unless jobbuf.database
// names that database (then it waits for CREATE EXTENSION jobbuf, as one worker did in 1.0).
#pragma once
#include "pg_includes.h"

// Instead of pqsignal(SIGTERM, die), before BackgroundWorkerUnblockSignals: SIGTERM still ends the
// process through die (a FATAL at the next CHECK_FOR_INTERRUPTS), and on its way out the process
// notes WorkerExit::Terminated in its slot, unless it noted another reason first. The launcher then
// restarts a drain worker at once; an exit without a note (an ERROR, a crash) backs off.
void take_sigterm_as_terminate(void);

// Connects, sets my_drain_slot to the slot and returns when the process is to drain; else exits.
void join_drain_slot(Datum main_arg);

// In the drain loop, when the extension is missing: a worker that does not wait for CREATE
// EXTENSION (database found by '*') notes WorkerExit::NoExtension and exits.
void leave_unless_waiting_for_extension(void);
