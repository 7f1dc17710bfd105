// Postgres regime: the launcher, jobbuf's one static background worker. It holds no database
// connection (only shared catalogs), so a missing or dropped jobbuf.database costs one log line
// instead of a crash loop: it starts the drain worker (a dynamic worker connected to
// jobbuf.database) when that database exists, watches it, and restarts it with backoff.
// Registered with BgWorkerStart_RecoveryFinished, it does nothing on a standby until promotion.
#include "pg_includes.h"

#include "worker/problem_log.h"
#include "settings.h"
#include "shared_state.h"

extern "C" {
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "utils/snapmgr.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

namespace {

constexpr int kCheckIntervalMs = 1000;
constexpr int kMinRestartDelayMs = 1000;
constexpr int kMaxRestartDelayMs = 60 * 1000;
constexpr int kHealthyRunMs = 60 * 1000;

enum class DatabaseState { Missing, ClosedToConnections, Ready };

// Without a database connection only shared catalogs are readable, and only by heap scan (as the
// logical replication launcher reads pg_subscription). A database that allows no connections
// (ALTER DATABASE ... ALLOW_CONNECTIONS false, which its owner may do) would make every start of
// the worker fail: the launcher waits instead.
DatabaseState database_state(const char* name)
{
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PushActiveSnapshot(GetTransactionSnapshot());
    DatabaseState state = DatabaseState::Missing;
    Relation rel = table_open(DatabaseRelationId, AccessShareLock);
    TableScanDesc scan = table_beginscan_catalog(rel, 0, nullptr);
    HeapTuple tuple;
    while (state == DatabaseState::Missing && (tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
        auto* db = reinterpret_cast<Form_pg_database>(GETSTRUCT(tuple));
        if (strcmp(NameStr(db->datname), name) == 0 && db->datconnlimit != DATCONNLIMIT_INVALID_DB)
            state = db->datallowconn ? DatabaseState::Ready : DatabaseState::ClosedToConnections;
    }
    table_endscan(scan);
    table_close(rel, AccessShareLock);
    PopActiveSnapshot();
    CommitTransactionCommand();
    return state;
}

bool start_drain_worker(BackgroundWorkerHandle** handle)
{
    BackgroundWorker worker;
    memset(&worker, 0, sizeof(worker));
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = BGW_NEVER_RESTART;  // the launcher restarts it, with backoff
    strlcpy(worker.bgw_library_name, "jobbuf", BGW_MAXLEN);
    strlcpy(worker.bgw_function_name, "jobbuf_drain_main", BGW_MAXLEN);
    strlcpy(worker.bgw_name, "jobbuf drain worker", BGW_MAXLEN);
    strlcpy(worker.bgw_type, "jobbuf drain worker", BGW_MAXLEN);
    worker.bgw_notify_pid = MyProcPid;
    return RegisterDynamicBackgroundWorker(&worker, handle);
}

bool drain_worker_alive(BackgroundWorkerHandle* handle)
{
    if (handle == nullptr)
        return false;
    pid_t pid;
    return GetBackgroundWorkerPid(handle, &pid) != BGWH_STOPPED;
}

}  // namespace

extern "C" PGDLLEXPORT void jobbuf_launcher_main(Datum arg);

void jobbuf_launcher_main(Datum arg)
{
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, die);
    BackgroundWorkerUnblockSignals();
    BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);  // shared catalogs only
    pgstat_report_appname("jobbuf launcher");

    BackgroundWorkerHandle* handle = nullptr;
    TimestampTz started_at = 0;
    TimestampTz next_start = 0;
    int restart_delay_ms = kMinRestartDelayMs;
    uint32 departures_seen = jobbuf_shared ? pg_atomic_read_u32(&jobbuf_shared->departures_for_drop) : 0;

    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }

        TimestampTz now = GetCurrentTimestamp();
        long wait_ms = kCheckIntervalMs;
        if (!drain_worker_alive(handle)) {
            if (handle != nullptr) {
                // It stopped: restart soon if it had run well or left for a DROP DATABASE (which
                // keeps it away itself while it lasts), later and later if it keeps dying.
                uint32 departures = jobbuf_shared ? pg_atomic_read_u32(&jobbuf_shared->departures_for_drop) : 0;
                bool left_for_drop = departures != departures_seen;
                departures_seen = departures;
                bool healthy = left_for_drop || TimestampDifferenceExceeds(started_at, now, kHealthyRunMs);
                restart_delay_ms = healthy ? kMinRestartDelayMs : Min(restart_delay_ms * 2, kMaxRestartDelayMs);
                next_start = left_for_drop ? now : TimestampTzPlusMilliseconds(now, restart_delay_ms);
                pfree(handle);
                handle = nullptr;
            }
            bool paused = jobbuf_shared && jobbuf_shared->pause_until > now;
            if (now >= next_start && !paused) {
                DatabaseState database = database_state(jobbuf_database);
                if (database != DatabaseState::Ready) {
                    char message[256];
                    snprintf(message, sizeof(message),
                             database == DatabaseState::Missing
                                 ? "database \"%s\" (jobbuf.database) does not exist; the worker starts when it does"
                                 : "database \"%s\" (jobbuf.database) does not allow connections; the worker starts when it does",
                             jobbuf_database);
                    report_problem(ProblemKind::Config, message);
                } else if (!start_drain_worker(&handle)) {
                    report_problem(ProblemKind::Config,
                                   "could not start the drain worker: max_worker_processes reached");
                } else {
                    report_recovered(ProblemKind::Config, "starting the drain worker");
                    started_at = now;
                }
            } else if (now < next_start) {
                wait_ms = Min(wait_ms, (next_start - now) / 1000 + 1);
            }
        }

        (void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
    }
}
