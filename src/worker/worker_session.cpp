// Postgres regime: the drain worker's trusted session settings.
//
// The worker runs SQL as the bootstrap superuser in a database that a less trusted role may own.
// That owner controls schema public (and every schema it creates) and the database's own
// settings (ALTER DATABASE ... SET), both of which reach a session at connection time. So the
// worker pins, at the highest priority (PGC_S_OVERRIDE: no later SET, per-database or per-role
// setting changes them):
//  * search_path = pg_catalog, pg_temp: no function, operator or type that someone created in
//    public can be picked over pg_catalog's by a statement of the worker, or of a function it
//    calls without its own pinned path (the CVE-2018-1058 class). The worker's statements are
//    schema-qualified as well, operators included, so neither defence depends on the other.
//  * role = none: the worker acts as itself, not as a role an owner named with ALTER DATABASE SET;
//  * the settings that would make every batch fail or wait: read-only default transactions, a
//    stricter default isolation level, statement, lock and idle timeouts.
#include "pg_includes.h"

#include "worker/worker_session.h"

extern "C" {
#include "utils/guc.h"
}

void pin_worker_session(void)
{
    static const char* const settings[][2] = {
        {"search_path", "pg_catalog, pg_temp"},
        {"role", "none"},
        {"default_transaction_read_only", "off"},
        {"default_transaction_isolation", "read committed"},
        {"statement_timeout", "0"},
        {"lock_timeout", "0"},
        {"idle_in_transaction_session_timeout", "0"},
    };
    for (const auto& setting : settings)
        SetConfigOption(setting[0], setting[1], PGC_SUSET, PGC_S_OVERRIDE);
}
