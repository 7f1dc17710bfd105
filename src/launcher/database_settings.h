// Postgres regime: the drain worker's per-database settings (ALTER DATABASE <its database> SET
// jobbuf.redis_* = ...). Postgres applies them when the worker connects; worker_session.cpp keeps
// them (and only them) through its reset of database settings. Postgres does not read them again
// on a reload: the worker compares them with what it started with and, when they changed, leaves
// so that the launcher restarts it at once with the new ones.
#pragma once
#include "pg_includes.h"

extern "C" {
#include "utils/guc_tables.h"
}

// Whether var is one the worker keeps from ALTER DATABASE ... SET: a jobbuf.redis_* setting,
// superuser-set (PGC_SUSET: ALTER DATABASE ... SET needed a superuser, or a GRANT SET by one),
// set for the worker's database itself (not for a role).
bool kept_database_setting(const config_generic* var);

// Remembers the jobbuf.* entries of pg_db_role_setting for this database (call once connected).
void remember_database_settings(void);

// The value those entries give name (palloc'd), or nullptr when they give none.
char* database_setting_value(const char* name);

// Once the worker session is pinned (worker_session.h): notes each of those entries that is not
// in force, a value Postgres refused when the worker connected (see refused_settings.h).
void note_refused_remembered_settings(void);

// On a reload: when those entries changed since remember_database_settings, logs it, notes
// WorkerExit::SettingsChanged and exits (the launcher restarts the worker without delay).
void leave_if_database_settings_changed(void);
