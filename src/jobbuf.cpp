// Postgres regime: the module entry point. _PG_init defines the GUCs, and, when loaded through
// shared_preload_libraries, reserves shared memory, installs the ProcessUtility hook
// (utility_hook.h) and registers the launcher worker; in every
// process it registers (once) the commit wake-up and the queue-cache invalidation callbacks.
#include "pg_includes.h"

#include "config/settings.h"
#include "config/shared_state.h"
#include "hooks/commit_wakeup.h"
#include "hooks/utility_hook.h"
#include "launcher/launcher_signal.h"
#include "metadata/installation_identity.h"
#include "staging/queue_cache.h"

extern "C" {
#include "postmaster/bgworker.h"
}

extern "C" {
PG_MODULE_MAGIC;
PGDLLEXPORT void _PG_init(void);
}

static void register_launcher(void)
{
    BackgroundWorker worker;
    memset(&worker, 0, sizeof(worker));
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = 10;
    strlcpy(worker.bgw_library_name, "jobbuf", BGW_MAXLEN);
    strlcpy(worker.bgw_function_name, "jobbuf_launcher_main", BGW_MAXLEN);
    strlcpy(worker.bgw_name, "jobbuf launcher", BGW_MAXLEN);
    strlcpy(worker.bgw_type, "jobbuf launcher", BGW_MAXLEN);
    RegisterBackgroundWorker(&worker);
}

void _PG_init(void)
{
    if (IsBinaryUpgrade)
        return;
    jobbuf_define_settings();
    register_commit_wakeup();
    register_launcher_signal();
    register_queue_cache_invalidation();
    register_installation_identity_invalidation();
    if (process_shared_preload_libraries_in_progress) {
        jobbuf_shared_state_install_hooks();
        install_utility_hook();
        register_launcher();
    }
}
