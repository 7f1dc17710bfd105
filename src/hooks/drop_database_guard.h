// Postgres regime: lets DROP DATABASE of jobbuf.database succeed while the drain worker runs. The
// ProcessUtility hook (utility_hook.h) calls the functions below around DROP DATABASE; the drain
// worker asks whether it must leave.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "datatype/timestamp.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
}

struct DrainSlot;

// Whether dropdb() will get past its checks of the caller and the database, as far as they can
// be known before it runs: only then is the database's worker asked to leave.
bool drop_would_be_allowed(const char* dbname, ProcessUtilityContext context);

// Asks the worker of slot s to leave and the launcher to keep it away for a while; returns the
// pause it set, for withdraw_request.
TimestampTz ask_worker_to_leave(DrainSlot* s);

// DROP DATABASE ... WITH (FORCE): it first waits (a few seconds at most) for the worker it asked
// to leave to be gone (wait_for_worker_to_leave), since FORCE may not terminate it.
bool drop_is_forced(const DropdbStmt* stmt);
void wait_for_worker_to_leave(pid_t pid);

// The drop failed: the worker may come back now (unless another drop asked for a later pause).
void withdraw_request(DrainSlot* s, TimestampTz until);

// True when the drain worker must leave its database now (a DROP DATABASE is waiting for it).
bool drain_worker_must_leave(void);

// Called by the drain worker as it leaves for a DROP DATABASE: the launcher then restarts it
// without counting the exit as a failure.
void note_departure_for_drop(void);
