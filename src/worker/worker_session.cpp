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
//    stricter default isolation level, statement, lock and idle timeouts;
//  * index plans: the worker's statements are prepared once, usually while jobbuf.jobs is nearly
//    empty, and must stay index-driven when a backlog builds up (a plan made for an empty table,
//    sequential scan and sort, makes every batch cost as much as the whole backlog); the disabled
//    plan shapes carry huge costs, which would make every batch pay for a JIT compilation, and the
//    worker's short statements never profit from JIT.
// Only this process is affected. Before that, every setting that came from ALTER DATABASE / ALTER ROLE ... SET goes back to the
// server's built-in default, whatever its name: session_authorization (the worker would act as
// the owner and every batch be refused), exit_on_error (every caught error would end the worker:
// a restart loop), synchronous_commit = off (a batch's delete could be lost in a crash after the
// next unit overwrote the marker: a duplicate), planner switches, and whatever Postgres adds later.
// Except the jobbuf.redis_* settings that a superuser gave the database (database_settings.h):
// they are how each database names its own Redis; and a jobbuf setting given to a role goes back
// to the server configuration's value (or the database's), never to the built-in default.
#include "pg_includes.h"
#include "pg_compat.h"

#include "launcher/database_settings.h"
#include "worker/worker_session.h"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/memutils.h"
}

namespace {

constexpr int kMaxJobbufSettings = 32;

struct ServerSetting {
    const char* name;  // the GUC's own name
    char* value;       // in TopMemoryContext
    GucSource source;
};

ServerSetting server_settings[kMaxJobbufSettings];
int server_setting_count = 0;

bool set_by_database_or_role(const config_generic* var)
{
    return var->source == PGC_S_GLOBAL || var->source == PGC_S_DATABASE || var->source == PGC_S_USER ||
           var->source == PGC_S_DATABASE_USER;
}

// The built-in default of var as a setting's text, or nullptr when it has none to give.
const char* built_in_default(config_generic* var, char* buffer, size_t len)
{
    switch (var->vartype) {
        case PGC_BOOL:
            return jobbuf_guc_bool(var)->boot_val ? "on" : "off";
        case PGC_INT:
            snprintf(buffer, len, "%d", jobbuf_guc_int(var)->boot_val);
            return buffer;
        case PGC_REAL:
            snprintf(buffer, len, "%.17g", jobbuf_guc_real(var)->boot_val);
            return buffer;
        case PGC_STRING:
            return jobbuf_guc_string(var)->boot_val;
        case PGC_ENUM:
            return jobbuf_guc_enum_name(var, jobbuf_guc_enum(var)->boot_val);
    }
    return nullptr;
}

// Gives a jobbuf setting that a role's settings replaced its value from the database
// (ALTER DATABASE ... SET) or else from the server configuration, with that source, so that
// reloads keep applying to it.
void restore_jobbuf_setting(config_generic* var)
{
    char* database_value = database_setting_value(var->name);
    const ServerSetting* server = nullptr;
    for (int i = 0; i < server_setting_count; i++)
        if (strcmp(server_settings[i].name, var->name) == 0)
            server = &server_settings[i];
    if (database_value == nullptr && server == nullptr)
        return;
    const char* value = database_value ? database_value : server->value;
    GucSource source = database_value ? PGC_S_DATABASE : server->source;
    if (set_config_option(var->name, value, PGC_SUSET, PGC_S_OVERRIDE, GUC_ACTION_SET, true, WARNING, false) > 0) {
        var->source = var->reset_source = source;
        var->scontext = var->reset_scontext = source == PGC_S_DATABASE ? PGC_SUSET : PGC_SIGHUP;
    }
    // Refused (a database value): the source stays the role's, and refused_settings.h stops delivery.
    if (database_value != nullptr)
        pfree(database_value);
}

// Puts every setting that ALTER DATABASE / ALTER ROLE ... SET gave this session back to its
// built-in default; session_authorization (no built-in value: the connecting user) back to the
// bootstrap superuser the worker connected as. A setting that refuses is logged, not fatal.
void drop_database_and_role_settings(void)
{
    StartTransactionCommand();  // some check hooks look up catalogs
    int count = 0;
    struct config_generic** vars = jobbuf_guc_variables(&count);
    for (int i = 0; i < count; i++) {
        config_generic* var = vars[i];
        if (!set_by_database_or_role(var) || (var->context != PGC_USERSET && var->context != PGC_SUSET) ||
            kept_database_setting(var))
            continue;
        if (strncmp(var->name, "jobbuf.", 7) == 0) {
            restore_jobbuf_setting(var);  // not the built-in default: a Redis nobody named
            continue;
        }
        char buffer[64];
        const char* value = strcmp(var->name, "session_authorization") == 0
                                ? GetUserNameFromId(BOOTSTRAP_SUPERUSERID, false)
                                : built_in_default(var, buffer, sizeof(buffer));
        if (value == nullptr)
            value = "";
        if (set_config_option(var->name, value, PGC_SUSET, PGC_S_OVERRIDE, GUC_ACTION_SET, true, WARNING, false) <= 0)
            ereport(WARNING, (errmsg("jobbuf: the drain worker could not reset \"%s\", set for its database or role",
                                     var->name)));
    }
    CommitTransactionCommand();
}

}  // namespace

void remember_server_settings(void)
{
    int count = 0;
    struct config_generic** vars = jobbuf_guc_variables(&count);
    for (int i = 0; i < count && server_setting_count < kMaxJobbufSettings; i++) {
        if (strncmp(vars[i]->name, "jobbuf.", 7) != 0 || (vars[i]->flags & GUC_CUSTOM_PLACEHOLDER))
            continue;
        ServerSetting& setting = server_settings[server_setting_count++];
        setting.name = vars[i]->name;
        setting.value = MemoryContextStrdup(TopMemoryContext, GetConfigOption(vars[i]->name, false, false));
        setting.source = vars[i]->source;
    }
}

void pin_worker_session(void)
{
    drop_database_and_role_settings();
    static const char* const settings[][2] = {
        {"search_path", "pg_catalog, pg_temp"},
        {"role", "none"},
        {"default_transaction_read_only", "off"},
        {"default_transaction_isolation", "read committed"},
        {"statement_timeout", "0"},
        {"lock_timeout", "0"},
        {"idle_in_transaction_session_timeout", "0"},
        {"enable_seqscan", "off"},
        {"enable_bitmapscan", "off"},
        {"enable_hashjoin", "off"},
        {"enable_mergejoin", "off"},
        {"plan_cache_mode", "force_generic_plan"},
        {"jit", "off"},
    };
    for (const auto& setting : settings)
        SetConfigOption(setting[0], setting[1], PGC_SUSET, PGC_S_OVERRIDE);
}
