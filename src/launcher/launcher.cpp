// Postgres regime: the launcher, jobbuf's one static background worker. It holds no database
// connection (only shared catalogs): it finds the databases jobbuf.database selects, starts one
// drain worker (a dynamic worker connected to that database, in its own shared-memory slot) for
// each that has the extension, up to jobbuf.max_workers, and restarts each with its own backoff.
// This file is its loop: signals, the launcher signals it takes (launcher_signal.h) and its wait;
// the state of each database, and what the launcher does with it: launcher_databases.h. Registered
// with BgWorkerStart_RecoveryFinished, it does nothing on a standby until promotion.
#include "pg_includes.h"

#include "config/shared_state.h"
#include "launcher/database_list.h"
#include "launcher/launcher_databases.h"
#include "launcher/launcher_signal.h"

extern "C" {
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

void forget_launcher_latch(int code, Datum arg)
{
    if (jobbuf_cluster != nullptr)
        jobbuf_cluster->launcher_latch = nullptr;
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
    if (jobbuf_cluster == nullptr)
        proc_exit(0);

    on_shmem_exit(forget_launcher_latch, (Datum)0);
    uint32 databases_seen = pg_atomic_read_u32(&jobbuf_cluster->databases_changed);
    reclaim_slots();
    jobbuf_cluster->launcher_latch = MyLatch;
    database_list_each(add_named_database);
    bool rescan = true;

    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        TimestampTz now = GetCurrentTimestamp();
        rescan = take_databases_changed(&databases_seen) || rescan;
        rescan = note_created_extensions() || rescan;
        stop_stuck_starts(now);
        reap_workers(now);
        if (rescan || any_start_due(now))
            refresh_databases();
        rescan = false;
        start_workers(now);
        publish_left_out();

        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, next_wait_ms(now), PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
    }
}
