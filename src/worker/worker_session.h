// Postgres regime: the drain worker's trusted session settings (see worker_session.cpp).
#pragma once

// Pins, for the worker's whole life, the settings through which the owner of its database (with
// ALTER DATABASE ... SET, or objects in public) could steer the worker's superuser session.
// Call once, right after the worker connected to its database.
void pin_worker_session(void);
