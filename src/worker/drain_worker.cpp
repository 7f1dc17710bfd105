// Postgres regime: the drain worker's main loop. Connected to jobbuf.database, it sleeps on its
// latch until a staging transaction commits (or poll_interval passes), then drains the queues
// that commits staged into, round-robin, one batch per queue per turn, until none has a full
// batch left; every poll_interval a full round looks at every active queue.
// Redis problems and Postgres errors are caught, logged once, and retried with capped backoff:
// the worker never exits because of bad data, bad configuration or an unavailable Redis.
#include "pg_includes.h"

#include "commit_wakeup.h"
#include "worker/drain_batch.h"
#include "worker/active_queues.h"
#include "worker/drain_group.h"
#include "worker/reconcile.h"
#include "worker/queue_progress.h"
#include "drop_database_guard.h"
#include "extension_version.h"
#include "worker/problem_log.h"
#include "settings.h"
#include "shared_state.h"
#include "worker/worker_session.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

using jobbuf::redis::SessionReport;

namespace {

constexpr int kMinBackoffMs = 100;
constexpr int kMaxBackoffMs = 30 * 1000;
constexpr int kErrorBackoffMs = 1000;
// Full passes restart every cursor at its queue's floor, head passes at the head of the queue
// (queue_progress.h). While an old snapshot keeps the rows delivered since the last vacuum,
// walking past them costs more with every job delivered; both kinds of pass then come this many
// times their walking time apart (5% of the worker), but full passes at least once a minute
// (run_at coming due, rows another transaction held) and head passes at least every ten
// minutes (released claims and two-phase commits below a cursor).
constexpr int kRestartScanSpacing = 20;
constexpr int kMaxFullPassSpacingMs = 60 * 1000;
constexpr int kMaxHeadPassSpacingMs = 10 * 60 * 1000;

enum class PassKind {
    Changed,  // the queues commits staged into, each from its cursor
    Full,     // every queue, each cursor restarted at its floor
    Head,     // every queue, each cursor restarted at 0
};

struct WorkerState {
    DrainContext ctx;
    MemoryContext queue_cxt;       // the active queue list, reset when it is reloaded
    bool reconcile_needed;
    int backoff_ms;
    TimestampTz next_attempt;      // no Redis attempt before this time
    bool redis_reported_down;
    char client_name[128];
    uint32 rotation;
    bool fencing_warned;
    bool full_round_due;           // the next round's first pass looks at every queue
    TimestampTz next_full_round;   // ... and so does the first pass after this time
    TimestampTz next_head_pass;    // the first full pass after this time is a head pass
    TimestampTz full_pass_started;
    TimestampTz head_pass_started;
    int64 full_scan_us;            // the last full pass's first batches (from restarted cursors)
    int64 head_scan_us;            // the same for the last head pass
};

WorkerState* state = nullptr;

void unpublish_worker(int code, Datum arg)
{
    if (jobbuf_shared) {
        SpinLockAcquire(&jobbuf_shared->mutex);
        jobbuf_shared->worker_pid = 0;
        jobbuf_shared->redis_connected = false;
        SpinLockRelease(&jobbuf_shared->mutex);
        jobbuf_shared->worker_latch = nullptr;
        jobbuf_shared->worker_database = InvalidOid;
    }
    if (state && state->ctx.session) {
        jobbuf::redis::drain_session_destroy(state->ctx.session);
        state->ctx.session = nullptr;
    }
}

void publish_worker(void)
{
    if (!jobbuf_shared)
        return;
    SpinLockAcquire(&jobbuf_shared->mutex);
    jobbuf_shared->worker_pid = MyProcPid;
    jobbuf_shared->redis_connected = false;
    SpinLockRelease(&jobbuf_shared->mutex);
    jobbuf_shared->worker_database = MyDatabaseId;
    pg_write_barrier();
    jobbuf_shared->worker_latch = MyLatch;
}

void apply_settings(void)
{
    char password[1024];
    char sentinel_password[1024];
    char error[512];
    SessionReport report;
    if (!read_redis_password(password, sizeof(password), error, sizeof(error)) ||
        !read_sentinel_password(sentinel_password, sizeof(sentinel_password), error, sizeof(error))) {
        report.status = SessionReport::Status::BadConfig;
        strlcpy(report.message, error, sizeof(report.message));
        jobbuf::redis::drain_session_unconfigure(state->ctx.session);
    } else {
        report = jobbuf::redis::drain_session_configure(
            state->ctx.session, redis_session_settings(password, sentinel_password, state->client_name));
    }
    explicit_bzero(password, sizeof(password));
    explicit_bzero(sentinel_password, sizeof(sentinel_password));
    if (report.status == SessionReport::Status::BadConfig)
        report_problem(ProblemKind::Config, report.message);
    else
        report_recovered(ProblemKind::Config, "jobbuf.redis_url is valid again");
    state->next_attempt = 0;  // a new configuration deserves an immediate attempt
    state->backoff_ms = 0;
}

void reload_settings_if_asked(void)
{
    if (ConfigReloadPending) {
        ConfigReloadPending = false;
        ProcessConfigFile(PGC_SIGHUP);
        apply_settings();
    }
}

// Schedules the next Redis attempt after a failure and logs the problem once.
void redis_failed(const char* message)
{
    state->backoff_ms = state->backoff_ms == 0 ? kMinBackoffMs : Min(state->backoff_ms * 2, kMaxBackoffMs);
    state->backoff_ms = Min(state->backoff_ms, Max(jobbuf_poll_interval, kMinBackoffMs) * 10);
    state->next_attempt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), state->backoff_ms);
    state->redis_reported_down = true;
    shared_state_set_redis_connected(jobbuf::redis::drain_session_connected(state->ctx.session));
    report_problem(ProblemKind::Redis, message);
}

void redis_succeeded(void)
{
    state->backoff_ms = 0;
    if (state->redis_reported_down) {
        state->redis_reported_down = false;
        char where[256];
        jobbuf::redis::drain_session_describe(state->ctx.session, where, sizeof(where));
        char message[320];
        snprintf(message, sizeof(message), "Redis at %s accepts jobs again", where);
        report_recovered(ProblemKind::Redis, message);
    }
    shared_state_set_redis_connected(true);
}

// Runs fn under PG_TRY: a Postgres error aborts the transaction, is logged once, and makes the
// worker reconcile and back off instead of exiting.
template <typename Fn>
bool run_guarded(Fn fn)
{
    MemoryContext caller_cxt = CurrentMemoryContext;
    volatile bool ok = true;
    PG_TRY();
    {
        fn();
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(caller_cxt);
        ErrorData* error = CopyErrorData();
        FlushErrorState();
        AbortCurrentTransaction();
        pgstat_report_activity(STATE_IDLE, nullptr);
        report_problem(ProblemKind::Database, error->message);
        FreeErrorData(error);
        ok = false;
    }
    PG_END_TRY();
    if (ok)
        report_recovered(ProblemKind::Database, "the last database error is resolved");
    return ok;
}

void database_failed(void)
{
    state->reconcile_needed = true;
    forget_active_queues();
    state->next_attempt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kErrorBackoffMs);
}

bool ensure_redis(void)
{
    bool fresh = false;
    if (!jobbuf::redis::drain_session_connected(state->ctx.session))
        pgstat_report_activity(STATE_RUNNING, "jobbuf: connecting to Redis");
    SessionReport report = jobbuf::redis::drain_session_connect(state->ctx.session, *state->ctx.waiter, &fresh);
    pgstat_report_activity(STATE_IDLE, nullptr);
    if (!run_guarded([] { state->ctx.waiter->raise_pending(); })) {  // see latch_io_waiter.h
        database_failed();
        return false;
    }
    if (report.status == SessionReport::Status::Interrupted)
        return false;
    if (report.status == SessionReport::Status::BadConfig) {
        report_problem(ProblemKind::Config, report.message);
        state->next_attempt = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kMaxBackoffMs);
        return false;
    }
    if (report.status != SessionReport::Status::Ok) {
        redis_failed(report.message);
        return false;
    }
    if (fresh) {
        state->reconcile_needed = true;  // a batch may have been cut off by the last disconnect
        redis_succeeded();
        if (report.message[0] != '\0' && !state->fencing_warned) {
            ereport(WARNING, (errmsg("jobbuf: %s", report.message)));
            state->fencing_warned = true;
        }
    }
    return true;
}

bool reconcile_if_needed(void)
{
    if (!state->reconcile_needed)
        return true;
    SessionReport report{};
    bool done = false;
    if (!run_guarded([&] { report = reconcile_delivered(&state->ctx, &done); })) {
        database_failed();
        return false;
    }
    if (report.status != SessionReport::Status::Ok) {
        redis_failed(report.message);
        return false;
    }
    state->reconcile_needed = !done;
    return done;
}

// Handles a batch that did not deliver: the next round reconciles (when part of the unit may be
// in Redis) after the backoff.
void batch_failed(const BatchResult& result)
{
    if (result.reconcile_needed)
        state->reconcile_needed = true;
    if (result.outcome != BatchOutcome::Interrupted)
        redis_failed(result.message);
}

// Nothing to drain until CREATE EXTENSION jobbuf, or until ALTER EXTENSION jobbuf UPDATE when the
// database still has an older version's SQL: say so once.
// - Missing: take what commits announced so far, so that the first commit after CREATE EXTENSION
//   finds the wake-up set empty and sets the worker's latch (a set left non-empty makes committers
//   send no signal); cursors start again from the head (a re-created extension numbers its jobs
//   from 1 again).
// - Outdated: leave the set as it is, so that the jobs staged meanwhile send no signal each (a
//   wake-up per commit for nothing); the update itself wakes the worker (it changes jobbuf.queues,
//   see jobbuf--1.0--1.1.sql), and the next round drains everything that waited.
void wait_for_installation(int why)
{
    if (why == kOutdatedExtension) {
        char message[kStatusErrorLen];
        snprintf(message, sizeof(message),
                 "database \"%s\" has jobbuf %s installed, this library needs %s: run ALTER EXTENSION jobbuf UPDATE "
                 "there; staged jobs wait until then",
                 jobbuf_database, installed_extension_version(), kJobbufSqlVersion);
        report_problem(ProblemKind::Config, message);
        return;
    }
    report_problem(ProblemKind::Config,
                   "the jobbuf extension is not installed in jobbuf.database; the worker waits for CREATE EXTENSION jobbuf");
    take_staged_work();
    forget_queue_progress();
}

// The queue list for the next pass (reloaded only when jobbuf.queues changed, or on a full pass)
// with the marker pointed at this installation of the extension. Returns the number of queues, or
// -1 when there is nothing to do (extension missing, or an error: backoff is set). *reloaded says
// whether the list was read again.
int load_pass(ActiveQueue** queues, bool reload, bool* reloaded)
{
    int nqueues = 0;
    if (!run_guarded([&] { nqueues = current_active_queues(state->queue_cxt, queues, reload, reloaded); })) {
        database_failed();
        return -1;
    }
    if (nqueues < 0) {
        wait_for_installation(nqueues);
        return -1;
    }
    report_recovered(ProblemKind::Config, "the jobbuf extension is installed and up to date; delivering");
    if (jobbuf::redis::drain_session_set_marker_key(state->ctx.session, marker_key()))
        state->reconcile_needed = true;
    return nqueues;
}

// Whether this pass looks at every queue: on the first pass of a round after a round that did
// not finish (an error, a backoff, the worker disabled, tables locked), and on any pass once
// poll_interval has passed since the last full pass (jobs whose run_at came due, expired group
// leases, rows skipped as locked), even in the middle of a long round; a full pass is a head
// pass (commits the wake-up cannot see, such as COMMIT PREPARED, and released claims) once
// poll_interval has passed since the last one. Both are spaced out by note_restart_scan.
PassKind start_pass(bool first)
{
    TimestampTz now = GetCurrentTimestamp();
    if (!(first && state->full_round_due) && now < state->next_full_round)
        return PassKind::Changed;
    state->next_full_round = TimestampTzPlusMilliseconds(now, jobbuf_poll_interval);
    state->full_pass_started = now;
    state->full_scan_us = 0;
    if (now < state->next_head_pass) {
        restart_queue_cursors_at_floor();
        return PassKind::Full;
    }
    state->next_head_pass = state->next_full_round;
    state->head_pass_started = now;
    state->head_scan_us = 0;
    forget_queue_progress();
    return PassKind::Head;
}

TimestampTz spaced_after(TimestampTz started, int64 scan_us, int max_spacing_ms)
{
    return started + Min(scan_us * kRestartScanSpacing, int64{max_spacing_ms} * 1000);
}

// Spaces full and head passes out when the first batches of their restarted cursors take long to
// find the first job (dead rows that an old snapshot keeps; see kRestartScanSpacing).
void note_restart_scan(int64 take_us, bool from_head)
{
    state->full_scan_us += take_us;
    state->next_full_round = Max(state->next_full_round,
                                 spaced_after(state->full_pass_started, state->full_scan_us, kMaxFullPassSpacingMs));
    if (from_head) {
        state->head_scan_us += take_us;
        state->next_head_pass = Max(state->next_head_pass,
                                    spaced_after(state->head_pass_started, state->head_scan_us, kMaxHeadPassSpacingMs));
    }
}

// Marks the queues that commits staged into since the last look as pending (every queue on a
// full pass, and after the queue list was reloaded: a new or resumed queue may have jobs) and
// rewinds the cursors past the lowest id those commits staged.
void note_staged_work(const ActiveQueue* queues, int nqueues, bool all)
{
    StagedWork work = take_staged_work();
    if (work.lowest_id != PG_INT64_MAX)
        rewind_queue_cursors(work.lowest_id);
    uint64 wanted = all ? PG_UINT64_MAX : work.queue_bits;
    for (int k = 0; k < nqueues; k++)
        if (wanted & queues[k].wake_bit)
            queue_progress(queues[k].name)->pending = true;
}

// One wake-up's work: passes over the queues with new work, one batch (or group) per queue per
// pass, until none of them has a full batch left; each pass also takes the commits that arrived
// during the previous one, so a queue with a long backlog cannot hold back a queue with one new
// job. Returns the milliseconds to sleep before the next round.
long drain_round(void)
{
    long sleep_ms = jobbuf_poll_interval;
    TimestampTz now = GetCurrentTimestamp();
    if (state->next_attempt > now) {
        long wait_ms = (state->next_attempt - now) / 1000 + 1;
        return Min(wait_ms, sleep_ms);
    }

    bool delivered_any = false;
    bool locked_out = false;
    for (bool more = true, first = true; more; first = false) {
        more = false;
        PassKind kind = start_pass(first);
        bool full = kind != PassKind::Changed;
        if (first)
            state->full_round_due = true;  // until this round finishes
        ActiveQueue* queues = nullptr;
        bool reloaded = false;
        int nqueues = load_pass(&queues, full, &reloaded);
        if (nqueues < 0)
            return sleep_ms;  // after an error, next_attempt holds the next round back
        note_staged_work(queues, nqueues, full || reloaded);
        if (nqueues == 0)
            break;
        if (!ensure_redis() || !reconcile_if_needed())
            return Max(state->backoff_ms, kMinBackoffMs);

        uint32 start = state->rotation++;
        for (int k = 0; k < nqueues; k++) {
            const ActiveQueue* q = &queues[(start + k) % nqueues];
            QueueProgress* progress = queue_progress(q->name);
            if (!progress->pending)
                continue;
            CHECK_FOR_INTERRUPTS();
            reload_settings_if_asked();
            if (!jobbuf_enabled || drain_worker_must_leave())
                return sleep_ms;
            BatchResult result{};
            bool restarted = progress->restarted && !q->group_delivery;
            bool from_head = progress->after_id == 0;
            if (!run_guarded([&] {
                    result = q->group_delivery ? drain_one_group(&state->ctx, q) : drain_one_batch(&state->ctx, q, progress);
                })) {
                database_failed();
                return kErrorBackoffMs;
            }
            if (restarted && result.outcome != BatchOutcome::Stale && result.outcome != BatchOutcome::Locked) {
                note_restart_scan(result.take_us, from_head);  // maybe in a later pass than the restart
                progress->restarted = false;
            }
            if (result.outcome == BatchOutcome::Stale) {
                more = true;  // the next pass reloads the queue list and looks at every queue
                break;
            }
            progress->pending = result.outcome == BatchOutcome::Full;  // a full batch: there may be more
            more = more || progress->pending;
            switch (result.outcome) {
            case BatchOutcome::Full:
            case BatchOutcome::Partial:
                delivered_any = true;
                break;
            case BatchOutcome::Empty:
                break;
            case BatchOutcome::Locked:
                locked_out = true;  // a full round again shortly
                break;
            default:
                batch_failed(result);
                return Max(state->backoff_ms, kMinBackoffMs);
            }
        }
    }
    state->full_round_due = locked_out;
    if (delivered_any)
        redis_succeeded();
    return locked_out ? kMinBackoffMs : sleep_ms;
}

}  // namespace

extern "C" PGDLLEXPORT void jobbuf_drain_main(Datum arg);

void jobbuf_drain_main(Datum arg)
{
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, die);
    BackgroundWorkerUnblockSignals();
    BackgroundWorkerInitializeConnection(jobbuf_database, nullptr, 0);
    pgstat_report_appname("jobbuf drain worker");

    state = static_cast<WorkerState*>(MemoryContextAllocZero(TopMemoryContext, sizeof(WorkerState)));
    state->queue_cxt = AllocSetContextCreate(TopMemoryContext, "jobbuf queue list", ALLOCSET_SMALL_SIZES);
    state->ctx.session = jobbuf::redis::drain_session_create();
    if (state->ctx.session == nullptr)
        ereport(FATAL, (errmsg("jobbuf: out of memory creating the Redis session")));
    void* waiter_memory = MemoryContextAlloc(TopMemoryContext, sizeof(LatchIoWaiter));
    state->ctx.waiter = new (waiter_memory) LatchIoWaiter();
    state->reconcile_needed = true;
    state->full_round_due = true;
    worker_client_name(state->client_name, sizeof(state->client_name));

    pin_worker_session();
    on_shmem_exit(unpublish_worker, (Datum) 0);
    publish_worker();
    apply_settings();
    ereport(LOG, (errmsg("jobbuf: drain worker started in database \"%s\"", jobbuf_database)));

    for (;;) {
        CHECK_FOR_INTERRUPTS();
        reload_settings_if_asked();
        if (drain_worker_must_leave()) {
            ereport(LOG, (errmsg("jobbuf: drain worker leaves database \"%s\" for DROP DATABASE", jobbuf_database)));
            note_departure_for_drop();
            proc_exit(0);
        }

        long sleep_ms = jobbuf_poll_interval;
        // While disabled, staged_queues stays non-empty: committers then skip the latch (a
        // signal per commit otherwise).
        if (jobbuf_enabled && !RecoveryInProgress())
            sleep_ms = drain_round();

        if (state->ctx.waiter->take_wakeup() && state->next_attempt <= GetCurrentTimestamp())
            continue;  // a commit arrived while we talked to Redis: scan again
        int rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, sleep_ms, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        if ((rc & WL_LATCH_SET) && jobbuf_shared)
            pg_atomic_fetch_add_u64(&jobbuf_shared->wakeups, 1);
    }
}
