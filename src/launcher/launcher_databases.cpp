// Postgres regime: the launcher's per-database state and its transitions (the state machine:
// launcher_databases.h): the scan of pg_database, the drain slots, starting and reaping the drain
// workers and the probe.
//
// What discovery costs: one scan of pg_database at start, then one scan per signal (CREATE
// DATABASE, ALTER / RENAME DATABASE) and before each (re)start; never a connection per database
// per poll. Each database found by '*' gets one short-lived connection at start: the drain worker
// started there checks pg_extension and leaves at once when jobbuf is not installed (when every
// slot is taken, the probe, one extra worker, checks instead, one database at a time, so that a
// database left out by the cap can be named). After that, a database without the extension costs
// nothing until CREATE EXTENSION jobbuf, whose commit tells the launcher (launcher_signal.h):
// its worker starts within milliseconds.
#include "pg_includes.h"

#include "config/settings.h"
#include "config/shared_state.h"
#include "launcher/database_list.h"
#include "launcher/launcher_databases.h"
#include "launcher/launcher_signal.h"
#include "status/problem_log.h"

extern "C" {
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

namespace {

constexpr int kCheckIntervalMs = 1000;
constexpr int kMinRestartDelayMs = 1000;
constexpr int kMaxRestartDelayMs = 60 * 1000;
constexpr int kHealthyRunMs = 60 * 1000;
// A worker (or the probe) not connected to its database this long after its start waits in
// InitPostgres (behind a lock on the database, for instance): it is stopped and its slot freed.
constexpr int kStartupTimeoutMs = 10 * 1000;

enum class Phase {
    Unchecked,         // may have the extension: a drain worker (or the probe) will look
    Probing,           // the probe is looking
    WithoutExtension,  // no worker until CREATE EXTENSION jobbuf there
    Wanted,            // has the extension (or is named in jobbuf.database): a drain worker runs or will
};

enum class Access { Ready, Missing, ClosedToConnections };

struct Entry {
    Oid oid;  // InvalidOid: a named database that does not exist (yet)
    char name[NAMEDATALEN];
    bool named;  // named in jobbuf.database: its worker waits for CREATE EXTENSION
    Phase phase;
    Access access;
    bool access_warned;      // the WARNING about access was logged
    bool left_out_warned;    // the WARNING about jobbuf.max_workers was logged
    bool recheck;            // CREATE EXTENSION came while a worker or the probe was deciding
    bool startup_timed_out;  // its worker (or the probe) was stopped before it connected
    bool startup_warned;     // the WARNING about that was logged
    int slot;                // drain slot index, -1 when none
    BackgroundWorkerHandle* handle;
    TimestampTz started_at;
    TimestampTz next_start;
    int restart_delay_ms;
};

struct DatabaseRow {
    Oid oid;
    NameData name;
    bool selectable;  // allows connections, not a template, not half-dropped
};

Entry* entries = nullptr;  // in TopMemoryContext
int entry_count = 0;
int entry_capacity = 0;

Entry* find_entry(Oid oid, const char* name)
{
    for (int i = 0; i < entry_count; i++)
        if ((OidIsValid(oid) && entries[i].oid == oid) ||
            (!OidIsValid(entries[i].oid) && name != nullptr && strcmp(entries[i].name, name) == 0))
            return &entries[i];
    return nullptr;
}

Entry* add_entry(Oid oid, const char* name, bool named)
{
    if (entry_count == entry_capacity) {
        entry_capacity = Max(16, entry_capacity * 2);
        entries = static_cast<Entry*>(entries == nullptr
                                          ? MemoryContextAlloc(TopMemoryContext, entry_capacity * sizeof(Entry))
                                          : repalloc(entries, entry_capacity * sizeof(Entry)));
    }
    Entry* e = &entries[entry_count++];
    memset(e, 0, sizeof(*e));
    e->oid = oid;
    strlcpy(e->name, name, NAMEDATALEN);
    e->named = named;
    e->phase = named ? Phase::Wanted : Phase::Unchecked;
    e->access = OidIsValid(oid) ? Access::Ready : Access::Missing;
    e->slot = -1;
    e->restart_delay_ms = kMinRestartDelayMs;
    return e;
}

void release_slot(Entry* e)
{
    if (e->slot >= 0)
        drain_slot_release(&jobbuf_cluster->slots[e->slot]);
    e->slot = -1;
}

void remove_entry(Entry* e)
{
    release_slot(e);
    *e = entries[--entry_count];
}

// Without a database connection only shared catalogs are readable, and only by heap scan (as the
// logical replication launcher reads pg_subscription).
DatabaseRow* scan_databases(int* count)
{
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PushActiveSnapshot(GetTransactionSnapshot());
    int capacity = 64;
    *count = 0;
    auto* rows = static_cast<DatabaseRow*>(MemoryContextAlloc(TopMemoryContext, capacity * sizeof(DatabaseRow)));
    Relation rel = table_open(DatabaseRelationId, AccessShareLock);
    TableScanDesc scan = table_beginscan_catalog(rel, 0, nullptr);
    HeapTuple tuple;
    while ((tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
        auto* db = reinterpret_cast<Form_pg_database>(GETSTRUCT(tuple));
        if (db->datconnlimit == DATCONNLIMIT_INVALID_DB)
            continue;  // half-dropped
        if (*count == capacity) {
            capacity *= 2;
            rows = static_cast<DatabaseRow*>(repalloc(rows, capacity * sizeof(DatabaseRow)));
        }
        DatabaseRow* row = &rows[(*count)++];
        row->oid = db->oid;
        row->name = db->datname;
        row->selectable = db->datallowconn && !db->datistemplate;
    }
    table_endscan(scan);
    table_close(rel, AccessShareLock);
    PopActiveSnapshot();
    CommitTransactionCommand();
    return rows;
}

// Records e's access; a database that cannot be started in gets one WARNING per change.
void set_access(Entry* e, Access access)
{
    bool changed = access != e->access;
    e->access = access;
    if (access == Access::Ready) {
        e->access_warned = false;
        return;
    }
    if (!changed && e->access_warned)
        return;
    e->access_warned = true;
    if (access == Access::Missing)
        ereport(WARNING,
                (errmsg("jobbuf: database \"%s\" (jobbuf.database) does not exist; the worker starts when it does",
                        e->name)));
    else
        ereport(WARNING, (errmsg("jobbuf: database \"%s\" does not allow connections; the worker starts when it does",
                                 e->name)));
}

int free_drain_slot(void)
{
    for (int i = 0; i < jobbuf_cluster->drain_slots; i++)
        if (!jobbuf_cluster->slots[i].in_use)
            return i;
    return -1;
}

bool start_worker(Entry* e, int slot_index, BackgroundWorkerHandle** handle)
{
    bool probe = slot_index == probe_slot_index();
    BackgroundWorker worker;
    memset(&worker, 0, sizeof(worker));
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = BGW_NEVER_RESTART;  // the launcher restarts it, with backoff
    strlcpy(worker.bgw_library_name, "jobbuf", BGW_MAXLEN);
    strlcpy(worker.bgw_function_name, "jobbuf_drain_main", BGW_MAXLEN);
    snprintf(worker.bgw_name, BGW_MAXLEN, probe ? "jobbuf probe of %s" : "jobbuf drain worker for %s", e->name);
    strlcpy(worker.bgw_type, probe ? "jobbuf probe" : "jobbuf drain worker", BGW_MAXLEN);
    worker.bgw_main_arg = Int32GetDatum(slot_index);
    memcpy(worker.bgw_extra, &e->oid, sizeof(e->oid));
    worker.bgw_notify_pid = MyProcPid;
    DrainSlot* slot = &jobbuf_cluster->slots[slot_index];
    if (probe)
        drain_slot_assign(slot, e->oid, e->name, false);
    pg_atomic_write_u32(&slot->exit_reason, static_cast<uint32>(WorkerExit::Unknown));
    pg_atomic_write_u32(&slot->connected, 0);
    e->startup_timed_out = false;
    e->started_at = GetCurrentTimestamp();
    if (RegisterDynamicBackgroundWorker(&worker, handle))
        return true;
    report_problem(ProblemKind::Config, "could not start a jobbuf worker: max_worker_processes reached");
    return false;
}

bool stopped(BackgroundWorkerHandle* handle)
{
    pid_t pid;
    return GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED;
}

// What to do after the probe looked at e.
void probe_finished(Entry* e, TimestampTz now)
{
    auto reason = static_cast<WorkerExit>(pg_atomic_read_u32(&jobbuf_cluster->slots[probe_slot_index()].exit_reason));
    drain_slot_release(&jobbuf_cluster->slots[probe_slot_index()]);
    if (reason == WorkerExit::HasExtension)
        e->phase = Phase::Wanted;
    else if (reason == WorkerExit::NoExtension && !e->recheck)
        e->phase = Phase::WithoutExtension;
    else {
        e->phase = Phase::Unchecked;
        e->next_start = reason == WorkerExit::NoExtension ? now : TimestampTzPlusMilliseconds(now, kMinRestartDelayMs);
    }
    e->recheck = false;
}

// What to do after e's drain worker stopped.
void drain_worker_finished(Entry* e, TimestampTz now)
{
    DrainSlot* slot = &jobbuf_cluster->slots[e->slot];
    auto reason = static_cast<WorkerExit>(pg_atomic_read_u32(&slot->exit_reason));
    bool recheck = e->recheck;
    e->recheck = false;
    if (e->startup_timed_out) {
        // It never connected: whether the database has the extension is still unknown, and its
        // slot goes back to the pool until the next try (with backoff).
        release_slot(e);
        e->phase = e->named ? Phase::Wanted : Phase::Unchecked;
        e->restart_delay_ms = Min(e->restart_delay_ms * 2, kMaxRestartDelayMs);
        e->next_start = TimestampTzPlusMilliseconds(now, e->restart_delay_ms);
        return;
    }
    if (reason == WorkerExit::NoExtension) {
        e->next_start = now;
        e->phase = recheck ? Phase::Unchecked : Phase::WithoutExtension;
        if (!recheck)
            release_slot(e);
        return;
    }
    e->phase = Phase::Wanted;  // it ran: the extension is there
    bool healthy = TimestampDifferenceExceeds(e->started_at, now, kHealthyRunMs);
    if (reason == WorkerExit::Terminated) {
        // SIGTERM ended it: pg_terminate_backend, a pooler's or a benchmark's cleanup, or the
        // server's shutdown. At shutdown the launcher got its own SIGTERM before this exit was
        // reported (the postmaster signals every process first): it leaves here, starting nothing.
        CHECK_FOR_INTERRUPTS();
        // Not a failure: restart at once (after a DROP DATABASE's pause, if one is set); the
        // backoff of real failures does not grow (a 60 s run resets it, as after any exit).
        if (healthy)
            e->restart_delay_ms = kMinRestartDelayMs;
        e->next_start = now;
        ereport(LOG, (errmsg("jobbuf: the drain worker for database \"%s\" was terminated; restarted at once",
                             e->name)));
        return;
    }
    // Restart soon if it ran well, left for a DROP DATABASE (which keeps it away itself while it
    // lasts) or for new settings; later and later if it keeps dying.
    bool planned = reason == WorkerExit::LeftForDrop || reason == WorkerExit::SettingsChanged;
    e->restart_delay_ms = planned || healthy ? kMinRestartDelayMs : Min(e->restart_delay_ms * 2, kMaxRestartDelayMs);
    e->next_start = planned ? now : TimestampTzPlusMilliseconds(now, e->restart_delay_ms);
    if (!planned)
        ereport(LOG, (errmsg("jobbuf: the drain worker for database \"%s\" stopped without being asked to (an "
                             "error or a crash); restarted in %d ms",
                             e->name, e->restart_delay_ms)));
}

bool start_due(const Entry* e, TimestampTz now)
{
    return e->handle == nullptr && e->access == Access::Ready && e->next_start <= now &&
           (e->phase == Phase::Wanted || e->phase == Phase::Unchecked) &&
           (e->slot < 0 || jobbuf_cluster->slots[e->slot].pause_until <= now);
}

void warn_left_out(Entry* e)
{
    if (e->left_out_warned)
        return;
    e->left_out_warned = true;
    ereport(
        WARNING,
        (errmsg(
             "jobbuf: database \"%s\" has the jobbuf extension but gets no drain worker: all jobbuf.max_workers (%d) are in use",
             e->name, jobbuf_max_workers),
         errhint("Raise jobbuf.max_workers (and max_worker_processes), or narrow jobbuf.database.")));
}

}  // namespace

// Brings the entries in line with pg_database: new databases that jobbuf.database selects are
// added; a database that is gone or closed to connections gets no (re)start; a dropped database
// found by '*' is forgotten (and its slot freed) once its worker has left.
void refresh_databases(void)
{
    int count = 0;
    DatabaseRow* rows = scan_databases(&count);
    bool every = database_list_is_every();
    bool* seen = static_cast<bool*>(palloc0(sizeof(bool) * (entry_count + count + 1)));
    for (int r = 0; r < count; r++) {
        const char* name = NameStr(rows[r].name);
        bool named = !every && database_list_names(name);
        Entry* e = find_entry(rows[r].oid, named ? name : nullptr);
        if (e == nullptr && (every || named) && rows[r].selectable)
            e = add_entry(rows[r].oid, name, named);
        if (e == nullptr)
            continue;
        if (e->oid != rows[r].oid)
            release_slot(e);  // a named database created again: a new database, a fresh slot
        e->oid = rows[r].oid;
        seen[e - entries] = true;
        set_access(e, rows[r].selectable ? Access::Ready : Access::ClosedToConnections);
        if (e->access != Access::Ready && e->handle == nullptr)
            release_slot(e);  // no worker can start there: its slot serves other databases meanwhile
    }
    for (int i = entry_count - 1; i >= 0; i--) {
        Entry* e = &entries[i];
        if (seen[i] || e->handle != nullptr)
            continue;
        if (!e->named) {
            remove_entry(e);
            continue;
        }
        release_slot(e);
        e->oid = InvalidOid;
        set_access(e, Access::Missing);
    }
    pfree(seen);
    pfree(rows);
}

// The named databases exist as entries from the start, so that a missing one is reported.
void add_named_database(const char* name)
{
    if (find_entry(InvalidOid, name) == nullptr)
        add_entry(InvalidOid, name, true);
}

// Notes the workers and the probe that stopped. Returns whether one did.
bool reap_workers(TimestampTz now)
{
    bool any = false;
    for (int i = 0; i < entry_count; i++) {
        Entry* e = &entries[i];
        if (e->handle == nullptr || !stopped(e->handle))
            continue;
        pfree(e->handle);
        e->handle = nullptr;
        any = true;
        if (e->phase == Phase::Probing)
            probe_finished(e, now);
        else
            drain_worker_finished(e, now);
    }
    return any;
}

// Stops the workers (and the probe) still not connected kStartupTimeoutMs after their start:
// one WARNING per database until one of its workers connects again.
void stop_stuck_starts(TimestampTz now)
{
    for (int i = 0; i < entry_count; i++) {
        Entry* e = &entries[i];
        if (e->handle == nullptr || e->startup_timed_out ||
            !TimestampDifferenceExceeds(e->started_at, now, kStartupTimeoutMs))
            continue;
        int slot = e->phase == Phase::Probing ? probe_slot_index() : e->slot;
        if (slot < 0 || pg_atomic_read_u32(&jobbuf_cluster->slots[slot].connected) != 0) {
            e->startup_warned = false;
            continue;
        }
        e->startup_timed_out = true;
        TerminateBackgroundWorker(e->handle);
        if (!e->startup_warned)
            ereport(WARNING,
                    (errmsg("jobbuf: the %s for database \"%s\" did not connect within %d s; it is stopped and "
                            "tried again later",
                            e->phase == Phase::Probing ? "probe" : "drain worker", e->name, kStartupTimeoutMs / 1000),
                     errhint("A session holding a lock on the database (an open ALTER DATABASE, for instance) "
                             "keeps new connections waiting.")));
        e->startup_warned = true;
    }
}

// CREATE EXTENSION jobbuf committed in these databases: look again. Returns whether a database
// the launcher does not know yet was named (read pg_database again).
bool note_created_extensions(void)
{
    Oid created[kCreatedPending];
    int count = take_created_extensions(created, kCreatedPending);
    bool unknown = false;
    for (int i = 0; i < entry_count && count < 0; i++)
        if (entries[i].phase == Phase::WithoutExtension)
            entries[i].phase = Phase::Unchecked;
    for (int k = 0; k < count; k++) {
        Entry* e = find_entry(created[k], nullptr);
        if (e == nullptr)
            unknown = true;
        else if (e->phase == Phase::WithoutExtension) {
            e->phase = Phase::Unchecked;
            e->next_start = 0;
        } else if (e->handle != nullptr)
            e->recheck = true;
    }
    return unknown || count < 0;
}

bool any_start_due(TimestampTz now)
{
    for (int i = 0; i < entry_count; i++)
        if (start_due(&entries[i], now) || (entries[i].access != Access::Ready && entries[i].handle == nullptr))
            return true;
    return false;
}

// Starts the drain workers that are due (those with the extension first), then the probe.
void start_workers(TimestampTz now)
{
    for (int phase_index = 0; phase_index < 2; phase_index++) {
        Phase phase = phase_index == 0 ? Phase::Wanted : Phase::Unchecked;
        for (int i = 0; i < entry_count; i++) {
            Entry* e = &entries[i];
            if (e->phase != phase || !start_due(e, now))
                continue;
            if (e->slot < 0) {
                e->slot = free_drain_slot();
                if (e->slot < 0) {
                    if (phase == Phase::Wanted)
                        warn_left_out(e);
                    continue;
                }
                drain_slot_assign(&jobbuf_cluster->slots[e->slot], e->oid, e->name, e->named);
            }
            e->left_out_warned = false;
            if (start_worker(e, e->slot, &e->handle)) {
                report_recovered(ProblemKind::Config, "jobbuf workers start again");
            } else {
                e->handle = nullptr;
                e->next_start = TimestampTzPlusMilliseconds(now, kMinRestartDelayMs);
            }
        }
    }
    for (int i = 0; i < entry_count && !jobbuf_cluster->slots[probe_slot_index()].in_use; i++) {
        Entry* e = &entries[i];
        if (e->phase != Phase::Unchecked || e->slot >= 0 || !start_due(e, now))
            continue;
        if (start_worker(e, probe_slot_index(), &e->handle)) {
            e->phase = Phase::Probing;
        } else {
            drain_slot_release(&jobbuf_cluster->slots[probe_slot_index()]);
            e->handle = nullptr;
            e->next_start = TimestampTzPlusMilliseconds(now, kMinRestartDelayMs);
        }
    }
}

// The databases left without a worker by the cap, for jobbuf_worker_status().
void publish_left_out(void)
{
    JobbufLauncherState* cluster = jobbuf_cluster;
    SpinLockAcquire(&cluster->mutex);
    cluster->left_out_count = 0;
    for (int i = 0; i < entry_count; i++) {
        const Entry* e = &entries[i];
        if (e->phase != Phase::Wanted || e->slot >= 0 || e->access != Access::Ready)
            continue;
        if (cluster->left_out_count < kLeftOutShown) {
            cluster->left_out[cluster->left_out_count] = e->oid;
            strlcpy(cluster->left_out_names[cluster->left_out_count], e->name, NAMEDATALEN);
        }
        cluster->left_out_count++;
    }
    SpinLockRelease(&cluster->mutex);
}

long next_wait_ms(TimestampTz now)
{
    long wait_ms = kCheckIntervalMs;
    for (int i = 0; i < entry_count; i++)
        if (entries[i].handle == nullptr && entries[i].next_start > now)
            wait_ms = Min(wait_ms, (entries[i].next_start - now) / 1000 + 1);
    return wait_ms;
}

// A launcher that starts while drain workers run (the previous launcher was terminated alone)
// cannot watch them (their handles died with it): it stops them, then starts afresh.
void reclaim_slots(void)
{
    for (int i = 0; i <= jobbuf_cluster->drain_slots; i++) {
        DrainSlot* slot = &jobbuf_cluster->slots[i];
        for (int waited_ms = 0; slot->in_use && slot->worker_pid != 0 && waited_ms < 10 * 1000; waited_ms += 50) {
            if (waited_ms == 0)
                kill(slot->worker_pid, SIGTERM);
            (void)WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 50, PG_WAIT_EXTENSION);
            CHECK_FOR_INTERRUPTS();
        }
        drain_slot_release(slot);
    }
}
