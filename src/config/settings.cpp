// Postgres regime: definitions and check hooks of the jobbuf.* GUCs. A bad value is refused at
// SET / reload time with the reason, so the worker never meets it.
#include "pg_includes.h"

#include "config/refused_settings.h"
#include "config/settings.h"
#include "redis/memory_guard.h"
#include "launcher/database_list.h"
#include "redis/endpoint.h"
#include "redis/url_check.h"

extern "C" {
#include "storage/fd.h"
#include "utils/guc.h"
}

char* jobbuf_redis_url = nullptr;
char* jobbuf_redis_password_file = nullptr;
int jobbuf_max_workers = 8;
int jobbuf_batch_size = 1000;
int jobbuf_batch_max_bytes = 16 * 1024 * 1024;
int jobbuf_poll_interval = 1000;
int jobbuf_redis_timeout = 2000;
bool jobbuf_enabled = true;
int jobbuf_rotation_min_size = -1;
int jobbuf_redis_tls_verify = static_cast<int>(jobbuf::redis::TlsOptions::Verify::Full);
char* jobbuf_redis_tls_ca_file = nullptr;
char* jobbuf_redis_tls_cert_file = nullptr;
char* jobbuf_redis_tls_key_file = nullptr;
char* jobbuf_redis_sentinel_password_file = nullptr;
int jobbuf_redis_min_replicas = 0;
char* jobbuf_redis_memory_limit = nullptr;
bool jobbuf_redis_require_noeviction = false;

static const struct config_enum_entry tls_verify_options[] = {
    {"full", static_cast<int>(jobbuf::redis::TlsOptions::Verify::Full), false},
    {"ca", static_cast<int>(jobbuf::redis::TlsOptions::Verify::Ca), false},
    {"none", static_cast<int>(jobbuf::redis::TlsOptions::Verify::None), false},
    {nullptr, 0, false},
};

// jobbuf.redis_url may carry a password, and members of pg_read_all_settings (so pg_monitor, the
// exporter's role) read GUC_SUPERUSER_ONLY settings: SHOW, current_setting(), pg_settings (its
// setting, reset_val and boot_val). A show hook would mask only the first two and setting:
// pg_settings.reset_val and GetConfigOption() give the stored text. So the stored text itself has
// the password masked ("rediss://user:********@host:6380/0"), for every role, and the URL as
// written is the value's extra, which the assign hook makes the worker's (effective_redis_url).
// GUC keeps each extra with its value (reset, SET LOCAL, rollback), so the two never disagree.
static const char kPasswordMask[] = "********";

// The URL as written of the current value, password included: what the worker connects with.
static const char* effective_redis_url = nullptr;

// The last applied URL that carried a password (malloc'd, this process's), so that its masked
// text, given back as a value (the drain worker restores the server's value from GetConfigOption,
// worker_session.cpp), means that URL again.
static char* applied_url_with_password = nullptr;

#if PG_VERSION_NUM >= 160000
static void* setting_alloc(size_t size) { return guc_malloc(LOG, size); }
static char* setting_strdup(const char* text) { return guc_strdup(LOG, text); }
static void setting_free(void* memory) { guc_free(memory); }
#else
// GUC frees values and extras with free() before 16
static void* setting_alloc(size_t size) { return malloc(size); }
static char* setting_strdup(const char* text) { return strdup(text); }
static void setting_free(void* memory) { free(memory); }
#endif

// Where the password of url is, by the parser's rules (redis/endpoint.cpp): the credentials end
// at the last '@' (unix://: at the first "@/"), the password follows the user's first ':'.
static bool find_url_password(const char* url, size_t* begin, size_t* end)
{
    const char* separator = strstr(url, "://");
    if (separator == nullptr)
        return false;
    const char* rest = separator + 3;
    const char* credentials_end;
    if (separator - url == 4 && pg_strncasecmp(url, "unix", 4) == 0)
        credentials_end = rest[0] == '/' ? nullptr : strstr(rest, "@/");
    else
        credentials_end = strrchr(rest, '@');
    if (credentials_end == nullptr)
        return false;
    const char* colon = static_cast<const char*>(memchr(rest, ':', credentials_end - rest));
    if (colon == nullptr)
        return false;
    *begin = colon + 1 - url;
    *end = credentials_end - url;
    return true;
}

// url with its password (if any) replaced by kPasswordMask, in GUC memory; nullptr when out of memory.
static char* masked_redis_url(const char* url)
{
    size_t begin, end;
    if (!find_url_password(url, &begin, &end))
        return setting_strdup(url);
    size_t size = begin + strlen(kPasswordMask) + strlen(url + end) + 1;
    char* text = static_cast<char*>(setting_alloc(size));
    if (text != nullptr)
        snprintf(text, size, "%.*s%s%s", static_cast<int>(begin), url, kPasswordMask, url + end);
    return text;
}

// True when shown is url with its password masked.
static bool masks(const char* shown, const char* url)
{
    size_t begin, end;
    if (!find_url_password(url, &begin, &end))
        return false;
    size_t mask_length = strlen(kPasswordMask);
    return strncmp(shown, url, begin) == 0 && strncmp(shown + begin, kPasswordMask, mask_length) == 0 &&
           strcmp(shown + begin + mask_length, url + end) == 0;
}

static bool check_redis_url(char** newval, void** extra, GucSource source)
{
    if (*newval == nullptr)
        return true;  // the boot value is being reset; the default below is valid
    // The masked text of the URL this process applied last: that URL (see applied_url_with_password).
    const char* url = *newval;
    if (applied_url_with_password != nullptr && masks(url, applied_url_with_password))
        url = applied_url_with_password;
    char reason[256];
    bool has_password = false;
    if (!jobbuf::redis::check_redis_url(url, reason, sizeof(reason), &has_password)) {
        note_server_url_check(source, reason);  // Postgres keeps another value: the worker must not use it
        GUC_check_errdetail("%s", reason);
        return false;
    }
    note_server_url_check(source, nullptr);
    // ALTER DATABASE / ROLE ... SET (checked as PGC_S_TEST) stores the value as written in
    // pg_db_role_setting, which every role can read: no password there.
    // The password as the worker would read it (the parser's rules: the last '@' ends it).
    if (source == PGC_S_TEST && has_password) {
        GUC_check_errdetail(
            "A password set with ALTER DATABASE would be readable by every role in pg_db_role_setting.");
        GUC_check_errhint("Set jobbuf.redis_password_file for the database instead.");
        return false;
    }
    if (has_password) {
        char* written = setting_strdup(url);
        char* masked = masked_redis_url(url);
        if (written == nullptr || masked == nullptr) {
            setting_free(written);
            setting_free(masked);
            GUC_check_errmsg("out of memory");
            return false;
        }
        setting_free(*newval);  // after its last use: url may be it
        *newval = masked;
        *extra = written;
    }
    return true;
}

static void assign_redis_url(const char* newval, void* extra)
{
    effective_redis_url = extra != nullptr ? static_cast<const char*>(extra) : newval;
    if (extra == nullptr)
        return;
    char* copy = strdup(static_cast<const char*>(extra));
    if (copy == nullptr)
        return;  // the previous one stays: only a restored masked value would miss this one
    free(applied_url_with_password);
    applied_url_with_password = copy;
}

static bool check_database(char** newval, void** extra, GucSource source)
{
    char detail[256];
    if (database_list_valid(*newval, detail, sizeof(detail)))
        return true;
    GUC_check_errdetail("%s", detail);
    return false;
}

static bool check_redis_memory_limit(char** newval, void** extra, GucSource source)
{
    if (*newval == nullptr)
        return true;
    char reason[256];
    if (jobbuf::redis::check_memory_limit(*newval, reason, sizeof(reason)))
        return true;
    GUC_check_errdetail("%s", reason);
    return false;
}

// TLS (rediss://), Sentinel and replica acknowledgement: read by the worker at each reload; suset
// like the other jobbuf.redis_* settings, so that ALTER DATABASE can set them per database.
static void define_production_redis_settings(void)
{
    DefineCustomEnumVariable("jobbuf.redis_tls_verify",
                             "How the worker checks the Redis server's TLS certificate (rediss://).",
                             "full: the chain and the host name (or IP address); ca: the chain only; none: nothing.",
                             &jobbuf_redis_tls_verify, static_cast<int>(jobbuf::redis::TlsOptions::Verify::Full),
                             tls_verify_options, PGC_SUSET, GUC_SUPERUSER_ONLY, nullptr, nullptr, nullptr);
    DefineCustomStringVariable("jobbuf.redis_tls_ca_file",
                               "PEM file of the CA certificates that sign the Redis server's certificate.",
                               "Empty: the system trust store.", &jobbuf_redis_tls_ca_file, "", PGC_SUSET,
                               GUC_SUPERUSER_ONLY, nullptr, nullptr, nullptr);
    DefineCustomStringVariable("jobbuf.redis_tls_cert_file",
                               "PEM file of the client certificate the worker presents to Redis (mutual TLS).",
                               "Empty: none.", &jobbuf_redis_tls_cert_file, "", PGC_SUSET, GUC_SUPERUSER_ONLY, nullptr,
                               nullptr, nullptr);
    DefineCustomStringVariable("jobbuf.redis_tls_key_file",
                               "PEM file of the private key of jobbuf.redis_tls_cert_file (not encrypted).",
                               "Empty: the key is in jobbuf.redis_tls_cert_file.", &jobbuf_redis_tls_key_file, "",
                               PGC_SUSET, GUC_SUPERUSER_ONLY, nullptr, nullptr, nullptr);
    DefineCustomStringVariable(
        "jobbuf.redis_sentinel_password_file",
        "File holding the password of the Redis sentinels (first line), for redis+sentinel:// URLs.",
        "Empty: the sentinels need no password.", &jobbuf_redis_sentinel_password_file, "", PGC_SUSET,
        GUC_SUPERUSER_ONLY, nullptr, nullptr, nullptr);
    DefineCustomIntVariable(
        "jobbuf.redis_min_replicas",
        "Replicas that must acknowledge each unit (WAIT) before the worker deletes its jobs.",
        "0: no WAIT. A unit not acknowledged within jobbuf.redis_timeout keeps its jobs staged; the delivery marker "
        "decides later whether they were delivered.",
        &jobbuf_redis_min_replicas, 0, 0, 16, PGC_SUSET, 0, nullptr, nullptr, nullptr);
    DefineCustomStringVariable(
        "jobbuf.redis_memory_limit",
        "How much of Redis's memory the drain may fill: off, a fraction of maxmemory, or a size such as '512MB'.",
        "A fraction applies under maxmemory-policy noeviction only; a size always. At the limit nothing is sent to "
        "that Redis (that master of a Cluster) until it is below 90 % of it; the jobs wait staged.",
        &jobbuf_redis_memory_limit, "0.8", PGC_SUSET, 0, check_redis_memory_limit, nullptr, nullptr);
    DefineCustomBoolVariable(
        "jobbuf.redis_require_noeviction",
        "Deliver nothing to a Redis that can evict jobs (maxmemory set and an allkeys-* policy).",
        "Off: such a Redis gets a WARNING and is delivered to.", &jobbuf_redis_require_noeviction, false, PGC_SUSET, 0,
        nullptr, nullptr, nullptr);
}

void jobbuf_define_settings(void)
{
    remember_given_settings();
    DefineCustomStringVariable(
        "jobbuf.database", "Databases whose staged jobs jobbuf drains, one worker each.",
        "'*': every database that allows connections and has the extension; or a comma-separated list of names.",
        &jobbuf_database, "*",
        // Postmaster context is only allowed while preloading; loaded later (no worker runs
        // then) the setting is informational, and defining it as postmaster would be FATAL.
        process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_SIGHUP, 0, check_database, nullptr,
        nullptr);

    DefineCustomIntVariable(
        "jobbuf.max_workers", "Most drain workers jobbuf runs at once (one per database).",
        "Each is a background worker: max_worker_processes must have room for them and the launcher.",
        &jobbuf_max_workers, 8, 1, 1024, process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_SIGHUP, 0,
        nullptr, nullptr, nullptr);

    DefineCustomStringVariable("jobbuf.redis_url", "Redis server the jobbuf worker pushes jobs to.",
                               "redis[s]://[user[:password]@]host[:port][/db], unix:///path[?db=N], or "
                               "redis[s]+sentinel://[user[:password]@]host[:port][,host[:port]...]/master[/db]; "
                               "a user without a password takes it from jobbuf.redis_password_file",
                               &jobbuf_redis_url, "redis://127.0.0.1:6379/0", PGC_SUSET, GUC_SUPERUSER_ONLY,
                               check_redis_url, assign_redis_url, nullptr);

    DefineCustomStringVariable(
        "jobbuf.redis_password_file",
        "File holding the Redis password (first line), kept out of postgresql.conf and the server log.",
        "When set, it replaces any password in jobbuf.redis_url.", &jobbuf_redis_password_file, "", PGC_SUSET,
        GUC_SUPERUSER_ONLY, nullptr, nullptr, nullptr);

    DefineCustomIntVariable("jobbuf.batch_size", "Jobs the worker moves to Redis per batch (one transaction each).",
                            nullptr, &jobbuf_batch_size, 1000, 1, 100000, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);

    DefineCustomIntVariable(
        "jobbuf.batch_max_bytes",
        "Bytes of JSON text per batch: a batch ends before the job that would pass this bound.",
        "Bounds the worker's memory whatever the payloads; a job larger than it goes alone in its batch. "
        "At most 256MB: the batch text also holds one job of up to 512MB, and Postgres buffers stop at 1GB.",
        &jobbuf_batch_max_bytes, 16 * 1024 * 1024, 64 * 1024, 256 * 1024 * 1024, PGC_SIGHUP, GUC_UNIT_BYTE, nullptr,
        nullptr, nullptr);

    DefineCustomIntVariable("jobbuf.poll_interval",
                            "Safety-net wake-up of the worker; commits of staging transactions wake it at once.",
                            nullptr, &jobbuf_poll_interval, 1000, 10, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr,
                            nullptr, nullptr);

    DefineCustomIntVariable("jobbuf.redis_timeout",
                            "Timeout of the worker's Redis connects, and of each wait for progress in a round trip.",
                            nullptr, &jobbuf_redis_timeout, 2000, 10, 600 * 1000, PGC_SUSET, GUC_UNIT_MS, nullptr,
                            nullptr, nullptr);

    DefineCustomIntVariable(
        "jobbuf.rotation_min_size",
        "Heap size from which storage rotation of jobbuf.jobs and jobbuf.queue_stats is due; -1: the built-in rule.",
        "For tests: forces rotations without a horizon held back for 15 s (docs/storage.md). The rule on live rows "
        "still applies.",
        &jobbuf_rotation_min_size, -1, -1, PG_INT32_MAX, PGC_SIGHUP, GUC_UNIT_BLOCKS | GUC_SUPERUSER_ONLY, nullptr,
        nullptr, nullptr);

    DefineCustomBoolVariable("jobbuf.enabled", "Whether the worker delivers jobs (staging continues either way).",
                             nullptr, &jobbuf_enabled, true, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);

    define_production_redis_settings();
    note_settings_refused_at_start();

    MarkGUCPrefixReserved("jobbuf");
}

// Reads the first line of the file that `setting` names (without its end of line) into buf.
static bool read_secret_file(const char* setting, const char* path, char* buf, size_t len, char* error,
                             size_t error_len)
{
    buf[0] = '\0';
    if (path == nullptr || path[0] == '\0')
        return true;
    FILE* file = AllocateFile(path, "r");
    if (file == nullptr) {
        snprintf(error, error_len, "cannot read %s \"%s\": %m", setting, path);
        return false;
    }
    bool ok = fgets(buf, static_cast<int>(len), file) != nullptr;
    FreeFile(file);
    if (!ok) {
        snprintf(error, error_len, "%s \"%s\" is empty", setting, path);
        return false;
    }
    buf[strcspn(buf, "\r\n")] = '\0';
    return true;
}

bool read_redis_password(char* buf, size_t len, char* error, size_t error_len)
{
    return read_secret_file("jobbuf.redis_password_file", jobbuf_redis_password_file, buf, len, error, error_len);
}

bool read_sentinel_password(char* buf, size_t len, char* error, size_t error_len)
{
    return read_secret_file("jobbuf.redis_sentinel_password_file", jobbuf_redis_sentinel_password_file, buf, len, error,
                            error_len);
}

jobbuf::redis::SessionSettings redis_session_settings(const char* password, const char* sentinel_password,
                                                      const char* client_name)
{
    jobbuf::redis::SessionSettings settings;
    settings.redis_url = effective_redis_url != nullptr ? effective_redis_url : jobbuf_redis_url;
    settings.password = password[0] != '\0' ? password : nullptr;
    settings.sentinel_password = sentinel_password;
    settings.timeout_ms = jobbuf_redis_timeout;
    settings.client_name = client_name;
    settings.tls_verify = jobbuf_redis_tls_verify;
    settings.tls_ca_file = jobbuf_redis_tls_ca_file;
    settings.tls_cert_file = jobbuf_redis_tls_cert_file;
    settings.tls_key_file = jobbuf_redis_tls_key_file;
    settings.min_replicas = jobbuf_redis_min_replicas;
    settings.memory_limit = jobbuf_redis_memory_limit != nullptr ? jobbuf_redis_memory_limit : "";
    settings.require_noeviction = jobbuf_redis_require_noeviction;
    return settings;
}
