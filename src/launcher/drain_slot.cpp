// Postgres regime: a drain worker's or the probe's start in its slot (see drain_slot.h).
#include "pg_includes.h"
#include "pg_compat.h"

#include "config/shared_state.h"
#include "launcher/database_settings.h"
#include "launcher/drain_slot.h"
#include "metadata/extension_version.h"
#include "worker/worker_session.h"

extern "C" {
#include "access/xact.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
}

#include <csignal>

namespace {

volatile sig_atomic_t sigterm_received = false;

void terminate_requested(SIGNAL_ARGS)
{
    sigterm_received = true;
    die(JOBBUF_SIGNAL_ARGS_PASSED);
}

// At proc_exit (on_shmem_exit): a process that SIGTERM asked to leave says so, unless it noted
// why it left already (NoExtension, LeftForDrop, ...).
void note_terminated_exit(int code, Datum arg)
{
    if (!sigterm_received || my_drain_slot == nullptr)
        return;
    uint32 unknown = static_cast<uint32>(WorkerExit::Unknown);
    (void)pg_atomic_compare_exchange_u32(&my_drain_slot->exit_reason, &unknown,
                                         static_cast<uint32>(WorkerExit::Terminated));
}

bool extension_installed(void)
{
    StartTransactionCommand();
    bool installed = installed_jobbuf().state != InstalledExtension::Missing;
    CommitTransactionCommand();
    return installed;
}

void leave(WorkerExit reason)
{
    shared_state_note_exit(reason);
    proc_exit(0);
}

}  // namespace

void take_sigterm_as_terminate(void)
{
    pqsignal(SIGTERM, terminate_requested);
    on_shmem_exit(note_terminated_exit, (Datum)0);
}

void join_drain_slot(Datum main_arg)
{
    int index = DatumGetInt32(main_arg);
    Oid database;
    memcpy(&database, MyBgworkerEntry->bgw_extra, sizeof(database));
    if (jobbuf_cluster == nullptr || index < 0 || index > probe_slot_index() ||
        jobbuf_cluster->slots[index].database != database)
        proc_exit(0);  // not the slot the launcher meant (cannot happen: it starts us after assigning it)
    my_drain_slot = &jobbuf_cluster->slots[index];
    remember_server_settings();  // before a role's settings replace them
    BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);
    pg_atomic_write_u32(&my_drain_slot->connected, 1);  // the launcher's start-up timeout ends here
    bool installed = extension_installed();
    if (index == probe_slot_index())
        leave(installed ? WorkerExit::HasExtension : WorkerExit::NoExtension);
    if (!installed && !my_drain_slot->waits_for_extension)
        leave(WorkerExit::NoExtension);  // quietly: the usual case of a database found by '*'
    remember_database_settings();
}

void leave_unless_waiting_for_extension(void)
{
    if (my_drain_slot == nullptr || my_drain_slot->waits_for_extension)
        return;
    ereport(
        LOG,
        (errmsg("jobbuf: database \"%s\" has no jobbuf extension; its drain worker stops until CREATE EXTENSION jobbuf",
                drain_database_name())));
    leave(WorkerExit::NoExtension);
}
