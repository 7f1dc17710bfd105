// Postgres regime: definitions and check hooks of the jobbuf.* GUCs. A bad value is refused at
// SET / reload time with the reason, so the worker never meets it.
#include "pg_includes.h"

#include "database_list.h"
#include "redis/url_check.h"
#include "settings.h"

extern "C" {
#include "storage/fd.h"
#include "utils/guc.h"
}

char* jobbuf_database = nullptr;
char* jobbuf_redis_url = nullptr;
char* jobbuf_redis_password_file = nullptr;
int jobbuf_max_workers = 8;
int jobbuf_batch_size = 1000;
int jobbuf_batch_max_bytes = 16 * 1024 * 1024;
int jobbuf_poll_interval = 1000;
int jobbuf_redis_timeout = 2000;
bool jobbuf_enabled = true;

// Whether url carries a password (redis://user:password@host or redis://:password@host).
static bool redis_url_has_password(const char* url)
{
    const char* authority = strstr(url, "://");
    if (authority == nullptr)
        return false;
    authority += 3;
    size_t length = strcspn(authority, "/?#");
    const char* at = static_cast<const char*>(memrchr(authority, '@', length));
    return at != nullptr && memchr(authority, ':', at - authority) != nullptr;
}

static bool check_redis_url(char** newval, void** extra, GucSource source)
{
    if (*newval == nullptr)
        return true;  // the boot value is being reset; the default below is valid
    char reason[256];
    if (!jobbuf::redis::check_redis_url(*newval, reason, sizeof(reason))) {
        GUC_check_errdetail("%s", reason);
        return false;
    }
    // ALTER DATABASE / ROLE ... SET (checked as PGC_S_TEST) stores the value in
    // pg_db_role_setting, which every role can read: no password there.
    if (source == PGC_S_TEST && redis_url_has_password(*newval)) {
        GUC_check_errdetail("A password set with ALTER DATABASE would be readable by every role in pg_db_role_setting.");
        GUC_check_errhint("Set jobbuf.redis_password_file for the database instead.");
        return false;
    }
    return true;
}

static bool check_database(char** newval, void** extra, GucSource source)
{
    char detail[256];
    if (database_list_valid(*newval, detail, sizeof(detail)))
        return true;
    GUC_check_errdetail("%s", detail);
    return false;
}

void jobbuf_define_settings(void)
{
    DefineCustomStringVariable(
        "jobbuf.database", "Databases whose staged jobs jobbuf drains, one worker each.",
        "'*': every database that allows connections and has the extension; or a comma-separated list of names.",
        &jobbuf_database, "*",
        // Postmaster context is only allowed while preloading; loaded later (no worker runs
        // then) the setting is informational, and defining it as postmaster would be FATAL.
        process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_SIGHUP, 0,
        check_database, nullptr, nullptr);

    DefineCustomIntVariable(
        "jobbuf.max_workers", "Most drain workers jobbuf runs at once (one per database).",
        "Each is a background worker: max_worker_processes must have room for them and the launcher.",
        &jobbuf_max_workers, 8, 1, 1024,
        process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_SIGHUP, 0, nullptr, nullptr, nullptr);

    DefineCustomStringVariable(
        "jobbuf.redis_url", "Redis server the jobbuf worker pushes jobs to.",
        "redis://[[user]:password@]host[:port][/db] or unix:///path[?db=N]",
        &jobbuf_redis_url, "redis://127.0.0.1:6379/0", PGC_SUSET, GUC_SUPERUSER_ONLY,
        check_redis_url, nullptr, nullptr);

    DefineCustomStringVariable(
        "jobbuf.redis_password_file",
        "File holding the Redis password (first line), kept out of postgresql.conf and the server log.",
        "When set, it replaces any password in jobbuf.redis_url.", &jobbuf_redis_password_file, "",
        PGC_SUSET, GUC_SUPERUSER_ONLY, nullptr, nullptr, nullptr);

    DefineCustomIntVariable(
        "jobbuf.batch_size", "Jobs the worker moves to Redis per batch (one transaction each).",
        nullptr, &jobbuf_batch_size, 1000, 1, 100000, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);

    DefineCustomIntVariable(
        "jobbuf.batch_max_bytes",
        "Bytes of JSON text per batch: a batch ends before the job that would pass this bound.",
        "Bounds the worker's memory whatever the payloads; a job larger than it goes alone in its batch. "
        "At most 256MB: the batch text also holds one job of up to 512MB, and Postgres buffers stop at 1GB.",
        &jobbuf_batch_max_bytes, 16 * 1024 * 1024, 64 * 1024, 256 * 1024 * 1024, PGC_SIGHUP, GUC_UNIT_BYTE,
        nullptr, nullptr, nullptr);

    DefineCustomIntVariable(
        "jobbuf.poll_interval",
        "Safety-net wake-up of the worker; commits of staging transactions wake it at once.",
        nullptr, &jobbuf_poll_interval, 1000, 10, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr,
        nullptr, nullptr);

    DefineCustomIntVariable(
        "jobbuf.redis_timeout", "Timeout of the worker's Redis connects, and of each wait for progress in a round trip.",
        nullptr, &jobbuf_redis_timeout, 2000, 10, 600 * 1000, PGC_SUSET, GUC_UNIT_MS, nullptr,
        nullptr, nullptr);

    DefineCustomBoolVariable(
        "jobbuf.enabled", "Whether the worker delivers jobs (staging continues either way).",
        nullptr, &jobbuf_enabled, true, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);

    MarkGUCPrefixReserved("jobbuf");
}

bool read_redis_password(char* buf, size_t len, char* error, size_t error_len)
{
    buf[0] = '\0';
    if (jobbuf_redis_password_file == nullptr || jobbuf_redis_password_file[0] == '\0')
        return true;
    FILE* file = AllocateFile(jobbuf_redis_password_file, "r");
    if (file == nullptr) {
        snprintf(error, error_len, "cannot read jobbuf.redis_password_file \"%s\": %m", jobbuf_redis_password_file);
        return false;
    }
    bool ok = fgets(buf, static_cast<int>(len), file) != nullptr;
    FreeFile(file);
    if (!ok) {
        snprintf(error, error_len, "jobbuf.redis_password_file \"%s\" is empty", jobbuf_redis_password_file);
        return false;
    }
    buf[strcspn(buf, "\r\n")] = '\0';
    return true;
}
