// Postgres regime: the launcher's per-database state (the loop that drives it: launcher.cpp). One
// entry per database jobbuf.database selects, made from scans of pg_database; each entry has a
// Phase (does the database have the extension, is a worker looking), an Access (can a worker
// connect there), at most one worker (its drain worker, or the probe) and maybe a drain slot.
//
// The state machine of one entry's Phase (numbers: the causes, listed below):
//
//         found by '*'                                      named in jobbuf.database
//              |                                                       |
//              v                                                       v
//       +-----------+ ---(5) its drain worker ran----------------> +--------+
//       |           | <--(7) its drain worker stopped unconnected- |        | ---+
//       | Unchecked |                                              | Wanted |    | (6) restart
//       |           | <--(9) NoExtension after CREATE EXTENSION--- |        | <--+
//       +-----------+                                              +--------+
//        |   |   ^  ^                                               ^     |
//     (1)|   |   |  +----(4)---- +---------+ ---(2) HasExtension----+     |
//        +---|---|-------------> | Probing |                                |
//            |   |               +---------+ ---(3)---+                   |
//         (8)|   |(10)                                |                (8)|
//            v   |                                    v                   |
//       +------------------+ <------------------------+-------------------+
//       | WithoutExtension |
//       +------------------+
//
// A worker starts for an entry in Unchecked or Wanted only when start_due: none runs, Access is
// Ready, its next start is reached and its slot is not paused by a DROP DATABASE. Wanted entries
// take the free drain slots first, then Unchecked ones (start_workers: an Unchecked entry's drain
// worker looks for the extension itself); a Wanted entry left without a slot is left out (one
// WARNING, listed by jobbuf_worker_status()). The transitions and their causes:
//  new: Unchecked for a database found by '*', Wanted for one named in jobbuf.database
//       (add_entry, from add_named_database at start and from refresh_databases).
//  (1)  Unchecked -> Probing: no drain slot was free and the probe slot was (start_workers).
//  (2)  Probing -> Wanted: the probe found the extension (probe_finished).
//  (3)  Probing -> WithoutExtension: it did not, and no CREATE EXTENSION came meanwhile.
//  (4)  Probing -> Unchecked: it did not but a CREATE EXTENSION came meanwhile (look again at
//       once), or it exited otherwise, crashed or stopped unconnected (look again in 1 s).
//  The exit of a drain worker (drain_worker_finished), from Unchecked or Wanted:
//  (5)  -> Wanted, any exit but (7), (8), (9): it ran, the extension is there;
//  (6)  Wanted -> Wanted: restarted at once when it left for a DROP DATABASE or for new settings,
//       or was ended by SIGTERM (pg_terminate_backend: WorkerExit::Terminated, one LOG; the delay
//       below is left as it was), else after a delay doubled at each exit (1 s to 60 s; back to
//       1 s after a 60 s run; one LOG);
//  (7)  -> Unchecked (Wanted when named): stopped because it had not connected 10 s after its
//       start (stop_stuck_starts); its slot freed, retried after a doubled delay;
//  (8)  -> WithoutExtension: NoExtension and no CREATE EXTENSION meanwhile; its slot freed;
//  (9)  -> Unchecked: NoExtension, but a CREATE EXTENSION came meanwhile: started again at once,
//       in its slot.
//  (10) WithoutExtension -> Unchecked: CREATE EXTENSION jobbuf committed in the database, or in
//       more databases than the launcher was told of (note_created_extensions). A CREATE
//       EXTENSION while a worker or the probe runs marks the entry for a recheck instead.
//  gone: a database found by '*' that left pg_database is forgotten once it has no worker (its
//       slot freed; refresh_databases).
//
// Access (refresh_databases, at each read of pg_database; one WARNING per change away from
// Ready: set_access):
//  Ready: the database exists, allows connections and is not a template;
//  ClosedToConnections: it does not allow connections, or is a template;
//  Missing: a database named in jobbuf.database does not exist (yet). Created again, it is a new
//       database, with a fresh slot.
// An entry that is not Ready and has no worker gives its drain slot back meanwhile, and has the
// launcher read pg_database again at each turn of its loop (any_start_due) until it is Ready.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "datatype/timestamp.h"
}

// Adds an entry for a database named in jobbuf.database (for database_list_each), so that a
// missing one is reported.
void add_named_database(const char* name);

// Reads pg_database and brings the entries in line with it (Access, new and dropped databases).
void refresh_databases(void);

// Notes the workers and the probe that stopped (their Phase changes). Returns whether one did.
bool reap_workers(TimestampTz now);

// Stops the workers (and the probe) still not connected 10 s after their start.
void stop_stuck_starts(TimestampTz now);

// Takes the CREATE EXTENSION notes (launcher_signal.h). Returns whether pg_database must be read
// again.
bool note_created_extensions(void);

// Whether an entry is due to start, or waits for its database to become Ready.
bool any_start_due(TimestampTz now);

// Starts the drain workers that are due, then the probe.
void start_workers(TimestampTz now);

// The databases left without a worker by jobbuf.max_workers, for jobbuf_worker_status().
void publish_left_out(void);

// How long the launcher may wait before the next start is due (at most 1 s).
long next_wait_ms(TimestampTz now);

// At the launcher's start: stops the drain workers a previous launcher left running, and frees
// every slot.
void reclaim_slots(void);
