// Postgres regime: records of jobbuf.redis_* values that were given but refused (see
// refused_settings.h). The records live in process memory: the postmaster's (made while
// shared_preload_libraries loads) are inherited by every worker it forks.
#include "pg_includes.h"
#include "pg_compat.h"

#include "config/refused_settings.h"
#include "redis/url_check.h"

extern "C" {
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/memutils.h"
}

namespace {

constexpr int kMaxRecords = 16;
constexpr const char* kRedisUrl = "jobbuf.redis_url";

enum class Level { Server, Database };

struct Refusal {
    bool active;
    bool checked_by_hook;  // re-checked by the jobbuf.redis_url check hook at each reload
    Level level;
    char name[NAMEDATALEN];
    char reason[200];
};

struct Given {
    char* name;
    char* value;
};

Refusal refusals[kMaxRecords];
Given given[kMaxRecords];
int given_count = 0;

bool is_redis_setting(const char* name)
{
    return pg_strncasecmp(name, "jobbuf.redis_", 13) == 0;
}

bool server_source(GucSource source)
{
    return source == PGC_S_ENV_VAR || source == PGC_S_FILE || source == PGC_S_ARGV;
}

config_generic* find_setting(const char* name)
{
    int count = 0;
    struct config_generic** vars = jobbuf_guc_variables(&count);
    for (int i = 0; i < count; i++)
        if (pg_strcasecmp(vars[i]->name, name) == 0)
            return vars[i];
    return nullptr;
}

Refusal* find_refusal(const char* name, Level level)
{
    for (Refusal& r : refusals)
        if (r.active && r.level == level && pg_strcasecmp(r.name, name) == 0)
            return &r;
    return nullptr;
}

void note(const char* name, Level level, bool checked_by_hook, const char* reason)
{
    Refusal* r = find_refusal(name, level);
    for (int i = 0; r == nullptr && i < kMaxRecords; i++)
        if (!refusals[i].active)
            r = &refusals[i];
    if (r == nullptr)
        r = &refusals[kMaxRecords - 1];  // more refused settings than records: still refused
    r->active = true;
    r->checked_by_hook = checked_by_hook;
    r->level = level;
    strlcpy(r->name, name, sizeof(r->name));
    strlcpy(r->reason, reason, sizeof(r->reason));
}

// Why value was refused, without quoting it: the URL parser's reason (which never quotes a
// secret) for jobbuf.redis_url, a fixed text otherwise (the server log has Postgres's message).
void why_refused(const char* name, const char* value, char* reason, size_t len)
{
    if (pg_strcasecmp(name, kRedisUrl) == 0 && value != nullptr && !jobbuf::redis::check_redis_url(value, reason, len))
        return;
    snprintf(reason, len, "not a valid value for it; the server log says why");
}

}  // namespace

void remember_given_settings(void)
{
    int count = 0;
    struct config_generic** vars = jobbuf_guc_variables(&count);
    for (int i = 0; i < count && given_count < kMaxRecords; i++) {
        config_generic* var = vars[i];
        if (!(var->flags & GUC_CUSTOM_PLACEHOLDER) || !is_redis_setting(var->name) || !server_source(var->source))
            continue;
        const char* value = *jobbuf_guc_string(var)->variable;
        given[given_count].name = MemoryContextStrdup(TopMemoryContext, var->name);
        given[given_count].value = MemoryContextStrdup(TopMemoryContext, value ? value : "");
        given_count++;
    }
}

void note_settings_refused_at_start(void)
{
    for (int i = 0; i < given_count; i++) {
        config_generic* var = find_setting(given[i].name);
        // Defined and still at its built-in default although a value was given: refused.
        if (var != nullptr && !(var->flags & GUC_CUSTOM_PLACEHOLDER) && var->source == PGC_S_DEFAULT &&
            find_refusal(var->name, Level::Server) == nullptr) {
            char reason[200];
            why_refused(var->name, given[i].value, reason, sizeof(reason));
            note(var->name, Level::Server, false, reason);
        }
        explicit_bzero(given[i].value, strlen(given[i].value));
        pfree(given[i].value);
        pfree(given[i].name);
    }
    given_count = 0;
}

void note_server_url_check(GucSource source, const char* reason)
{
    if (!server_source(source))
        return;
    if (reason != nullptr) {
        note(kRedisUrl, Level::Server, true, reason);
    } else if (Refusal* r = find_refusal(kRedisUrl, Level::Server)) {
        r->active = false;
    }
}

void forget_fixed_refusals(void)
{
    for (Refusal& r : refusals) {
        if (!r.active || r.level != Level::Server || r.checked_by_hook)
            continue;
        config_generic* var = find_setting(r.name);
        if (var != nullptr && var->source != PGC_S_DEFAULT)
            r.active = false;  // a reload applied a valid value
    }
}

void note_refused_database_settings(const char* entries)
{
    for (const char* line = entries; *line != '\0';) {
        const char* end = strchr(line, '\n');
        size_t line_len = end ? static_cast<size_t>(end - line) : strlen(line);
        const char* equals = static_cast<const char*>(memchr(line, '=', line_len));
        if (equals != nullptr && static_cast<size_t>(equals - line) < NAMEDATALEN) {
            char name[NAMEDATALEN];
            strlcpy(name, line, equals - line + 1);
            char* value = pnstrdup(equals + 1, line_len - (equals + 1 - line));
            config_generic* var = find_setting(name);
            if (is_redis_setting(name) && (var == nullptr || var->source != PGC_S_DATABASE)) {
                char reason[200];
                why_refused(name, value, reason, sizeof(reason));
                note(name, Level::Database, false, reason);
            }
            explicit_bzero(value, strlen(value));
            pfree(value);
        }
        line += line_len + (end ? 1 : 0);
    }
}

bool describe_refused_setting(char* out, size_t len)
{
    for (const Refusal& r : refusals) {
        if (!r.active)
            continue;
        if (r.level == Level::Database) {
            snprintf(out, len,
                     "%s set for this database (ALTER DATABASE ... SET) was refused (%s): no delivery, jobs stay "
                     "staged until it is corrected",
                     r.name, r.reason);
            return true;
        }
        // A valid value given for the database replaces the server's refused one.
        config_generic* var = find_setting(r.name);
        if (var != nullptr && var->source >= PGC_S_GLOBAL)
            continue;
        snprintf(out, len,
                 "%s in the server configuration was refused (%s): no delivery, jobs stay staged until a valid value "
                 "is reloaded",
                 r.name, r.reason);
        return true;
    }
    return false;
}
