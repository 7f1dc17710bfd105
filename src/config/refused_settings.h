// Postgres regime: the jobbuf.redis_* settings that were given a value (postgresql.conf, ALTER
// SYSTEM, the command line, or ALTER DATABASE ... SET) that Postgres refused. Postgres then keeps
// the built-in default (at server start) or the previous value (at a reload) and logs one
// WARNING; a worker that went on would deliver to a Redis nobody named, and send it the password.
// The worker asks describe_refused_setting and delivers nothing while it answers true.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "utils/guc.h"
}

// _PG_init, around the definition of the settings: before it, remembers the values the server
// configuration gave the jobbuf.redis_* placeholders; after it, notes each one the definition
// refused (its setting then holds the built-in default).
void remember_given_settings(void);
void note_settings_refused_at_start(void);

// The jobbuf.redis_url check hook reports here each check of a value from the server
// configuration (refused: reason; accepted: nullptr).
void note_server_url_check(GucSource source, const char* reason);

// The drain worker, after each reload: forgets what a valid value has since replaced.
void forget_fixed_refusals(void);

// The drain worker, once its worker session is pinned: notes each jobbuf.redis_* entry of
// pg_db_role_setting for its database ("name=value" lines) that is not in force.
void note_refused_database_settings(const char* entries);

// Whether a given value of a jobbuf.redis_* setting is refused and nothing given replaces it;
// then out holds one line that names the setting and why (never its value).
bool describe_refused_setting(char* out, size_t len);
