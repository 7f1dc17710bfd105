// Postgres regime: lets DROP DATABASE of jobbuf.database succeed while the drain worker runs.
#pragma once

// Installs the ProcessUtility hook; from _PG_init when preloaded.
void install_drop_database_guard(void);

// True when the drain worker must leave its database now (a DROP DATABASE is waiting for it).
bool drain_worker_must_leave(void);

// Called by the drain worker as it leaves for a DROP DATABASE: the launcher then restarts it
// without counting the exit as a failure.
void note_departure_for_drop(void);
