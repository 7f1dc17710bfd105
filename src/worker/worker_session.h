// Postgres regime: the drain worker's trusted session settings (see worker_session.cpp).
#pragma once

// Pins, for the worker's whole life, the settings through which the owner of its database (with
// ALTER DATABASE ... SET, or objects in public) could steer the worker's superuser session.
// Call once, right after the worker connected to its database.
void pin_worker_session(void);

// Remembers the jobbuf settings as the server configuration gives them. Call before connecting:
// an ALTER ROLE ... SET of the role the worker connects as replaces them then, and
// pin_worker_session puts these (or the database's own jobbuf.redis_* values) back.
void remember_server_settings(void);
