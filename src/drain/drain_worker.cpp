// Postgres regime: the drain worker's main loop. Connected to its database, it sleeps on its
// latch until a staging transaction commits (or poll_interval passes), then drains the queues
// that commits staged into, round-robin, one batch per queue per pass, until none has a full
// batch left; every poll_interval a full pass looks at every active queue.
// Redis problems and Postgres errors are caught, logged once, and retried with capped backoff:
// the worker never exits because of bad data, bad configuration or an unavailable Redis.
#include "pg_includes.h"

#include "census/queue_census.h"
#include "config/refused_settings.h"
#include "config/settings.h"
#include "config/shared_state.h"
#include "delivery/delivery_counter.h"
#include "delivery/drain_batch.h"
#include "delivery/depth_cap.h"
#include "delivery/drain_group.h"
#include "delivery/reconcile.h"
#include "drain/active_queues.h"
#include "drain/pass_plan.h"
#include "drain/pending_queues.h"
#include "drain/queue_failures.h"
#include "drain/queue_progress.h"
#include "drain/queues_with_jobs.h"
#include "drain/redis_health.h"
#include "drain/refused_targets.h"
#include "hooks/commit_wakeup.h"
#include "hooks/drop_database_guard.h"
#include "launcher/database_settings.h"
#include "launcher/drain_slot.h"
#include "worker/worker_transaction.h"
#include "metadata/extension_version.h"
#include "rotation/storage_rotation.h"
#include "schedules/tick_staging.h"
#include "status/problem_log.h"
#include "status/queue_flow.h"
#include "worker/guarded_call.h"
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

// A Postgres error holds the next round back this long.
constexpr int kErrorBackoffMs = 1000;
// While a queue waits for room in Redis (below jobbuf.redis_memory_limit, below its max_in_redis),
// the round comes again this soon: the room is read again at most that often (kDepthRecheckMs;
// the memory guard every 100 ms).
constexpr long kHeldBackRecheckMs = kDepthRecheckMs;

struct WorkerState {
    DrainContext ctx;
    MemoryContext queue_cxt;  // the active queue list, reset when it is reloaded
    bool reconcile_needed;
    char client_name[128];
    char lease_value[MAXPGPATH + 384];  // this cluster, as the delivery lease names it
    TimestampTz lease_kept_at;          // when the lease was last taken or refreshed
    TimestampTz lease_held_since;       // when another cluster was first found holding it (0: not)
    uint32 next_pass_start;             // where the next pass starts among the pending queues
    bool fencing_warned;
    bool take_over_pending;  // jobbuf_take_over() asked; cleared in the table once the lease is taken
    bool targets_noted;                    // note_refused_targets ran since the last load and connection
    char config_problem[kStatusErrorLen];  // why the Redis settings are unusable; empty: they are usable
};

WorkerState* state = nullptr;

void unpublish_worker(int code, Datum arg)
{
    if (my_drain_slot) {
        SpinLockAcquire(&my_drain_slot->mutex);
        my_drain_slot->worker_pid = 0;
        my_drain_slot->redis_connected = false;
        SpinLockRelease(&my_drain_slot->mutex);
        my_drain_slot->worker_latch = nullptr;
    }
    if (state && state->ctx.session) {
        jobbuf::redis::drain_session_destroy(state->ctx.session);
        state->ctx.session = nullptr;
    }
}

void publish_worker(void)
{
    if (!my_drain_slot)
        return;
    SpinLockAcquire(&my_drain_slot->mutex);
    my_drain_slot->worker_pid = MyProcPid;
    my_drain_slot->redis_connected = false;
    SpinLockRelease(&my_drain_slot->mutex);
    pg_write_barrier();
    my_drain_slot->worker_latch = MyLatch;
}

void apply_settings(void)
{
    char password[1024];
    char sentinel_password[1024];
    char error[512];
    SessionReport report;
    if (describe_refused_setting(error, sizeof(error))) {
        // Given but refused: Postgres put another value in its place, which nobody chose.
        report.status = SessionReport::Status::BadConfig;
        strlcpy(report.message, error, sizeof(report.message));
        jobbuf::redis::drain_session_unconfigure(state->ctx.session);
    } else if (!read_redis_password(password, sizeof(password), error, sizeof(error)) ||
               !read_sentinel_password(sentinel_password, sizeof(sentinel_password), error, sizeof(error))) {
        report.status = SessionReport::Status::BadConfig;
        strlcpy(report.message, error, sizeof(report.message));
        jobbuf::redis::drain_session_unconfigure(state->ctx.session);
    } else {
        report = jobbuf::redis::drain_session_configure(state->ctx.session,
                                                        redis_session_settings(password, sentinel_password,
                                                                               state->client_name));
    }
    explicit_bzero(password, sizeof(password));
    explicit_bzero(sentinel_password, sizeof(sentinel_password));
    if (report.status == SessionReport::Status::BadConfig) {
        strlcpy(state->config_problem, report.message, sizeof(state->config_problem));
        shared_state_set_redis_connected(false);
        report_problem(ProblemKind::Settings, report.message);
    } else {
        state->config_problem[0] = '\0';
        report_recovered(ProblemKind::Settings, "the Redis settings are valid again");
    }
    delay_redis_attempts(0);  // a new configuration deserves an immediate attempt
}

void reload_settings_if_asked(void)
{
    if (ConfigReloadPending) {
        ConfigReloadPending = false;
        ProcessConfigFile(PGC_SIGHUP);
        forget_fixed_refusals();
        leave_if_database_settings_changed();
        apply_settings();
    }
}

void database_failed(void)
{
    state->reconcile_needed = true;
    forget_active_queues();
    delay_redis_attempts(kErrorBackoffMs);
}

// The delivery lease lasts twice jobbuf.redis_timeout; it is refreshed once a quarter of that has
// passed (before a batch, and by an idle worker, whose sleep is capped to that quarter).
long lease_refresh_ms(void)
{
    return Max(jobbuf_redis_timeout / 2, 1);
}

// Another cluster holds the delivery lease. The lease of a holder that stopped (a standby
// promoted after its primary stopped) lapses for this cluster once it has seen it unchanged for
// its lifetime, twice jobbuf.redis_timeout (session_lease.cpp); a lease still held a
// jobbuf.redis_timeout after that is a live twin, said in one WARNING (a problem of its own kind,
// ended by one LOG line once this cluster holds the lease). Until then the worker retries quietly.
void lease_held_elsewhere(const char* message)
{
    TimestampTz now = GetCurrentTimestamp();
    cap_redis_backoff(0);
    if (state->lease_held_since == 0)
        state->lease_held_since = now;
    if (TimestampDifferenceExceeds(state->lease_held_since, now, 3 * jobbuf_redis_timeout)) {
        shared_state_set_redis_connected(false);
        report_problem(ProblemKind::Lease, message);
    }
    // Looked at again every quarter of jobbuf.redis_timeout, also after the WARNING: the lease
    // lapses for this cluster only once it has seen it unchanged for its lifetime with no gap
    // longer than half of it (session_lease.cpp).
    delay_redis_attempts(Max(jobbuf_redis_timeout / 4, 1));
}

// Redis closed the idle connection: not connected any more; the next round connects again.
void connection_lost(void)
{
    shared_state_set_redis_connected(false);
    state->reconcile_needed = true;
}

// Acts on the report of a drain session call the worker made (pending database errors raised
// first): true when it is Ok; otherwise the failure is reported (a bad setting, the lease held by
// another cluster, a Redis failure) and the caller stops this round.
bool session_call_succeeded(const SessionReport& report)
{
    if (!run_guarded([] { state->ctx.waiter->raise_pending(); })) {  // see latch_io_waiter.h
        database_failed();
        return false;
    }
    switch (report.status) {
        case SessionReport::Status::Ok:
            return true;
        case SessionReport::Status::Interrupted:
            return false;
        case SessionReport::Status::BadConfig:
            report_problem(ProblemKind::Settings,
                           state->config_problem[0] != '\0' ? state->config_problem : report.message);
            delay_redis_attempts(kMaxBackoffMs);
            return false;
        case SessionReport::Status::Held:
            lease_held_elsewhere(report.message);
            return false;
        default:
            redis_failed(state->ctx.session, report.message);
            return false;
    }
}

// After a connection: a lease taken from another start is logged; one taken by
// jobbuf_take_over() raises this cluster's delivery counter to the highest number in Redis and
// clears the request, before reconciliation reads the markers: the other holder's marker is then
// never acted on (its batch in flight, if it was one, may reach Redis twice; no job is lost).
// False on a database error (the connection is dropped and taken again later).
bool note_lease_taken(void)
{
    bool forced = false;
    int64 highest = 0;
    char from[jobbuf::redis::kMessageLen];
    bool took = jobbuf::redis::drain_session_took_over(state->ctx.session, &forced, &highest, from, sizeof(from));
    if (!took && !state->take_over_pending)
        return true;
    if (state->take_over_pending &&
        !run_guarded([&] {
            begin_worker_transaction("jobbuf: taking over the delivery lease");
            raise_delivery_counter(forced ? highest : 0, true);
            commit_worker_transaction();
        })) {
        jobbuf::redis::drain_session_request_take_over(state->ctx.session);  // taken again, recorded then
        return false;
    }
    state->take_over_pending = false;
    if (took && forced)
        ereport(LOG, (errmsg("jobbuf: took the delivery lease over from %s, as jobbuf_take_over() asked; the "
                             "jobs its last marker names are not reconciled here (a batch it had in flight may "
                             "reach Redis twice, none is lost)",
                             from)));
    else if (took)
        ereport(LOG, (errmsg("jobbuf: took over the lapsed delivery lease of %s, an earlier start of this cluster",
                             from)));
    return true;
}

// The lease was found free (the key lost: a Redis restarted without persistence, FLUSHDB, a 1.2
// lease's TTL) and taken, at a connection or a refresh: one LOG line when Redis showed an earlier
// holder (this start's markers, or ones it continues), or none but this cluster had delivered.
void note_free_lease_taken(void)
{
    bool proven = false;
    if (!jobbuf::redis::drain_session_took_free_lease(state->ctx.session, &proven))
        return;
    if (proven)
        ereport(LOG, (errmsg("jobbuf: the delivery lease was missing from Redis; this start took it again, as it "
                             "continues the last delivery marker's writer")));
    else if (loaded_delivery_counter() > 0)
        ereport(LOG, (errmsg("jobbuf: the delivery lease was missing from Redis, with no delivery marker of this "
                             "installation left (Redis lost its data); this start took it with nothing to prove "
                             "(delivery counter " INT64_FORMAT "): another cluster with this identity now finds "
                             "it held",
                             loaded_delivery_counter())));
}

bool ensure_redis(void)
{
    bool fresh = false;
    if (!jobbuf::redis::drain_session_connected(state->ctx.session))
        pgstat_report_activity(STATE_RUNNING, "jobbuf: connecting to Redis");
    SessionReport report = jobbuf::redis::drain_session_connect(state->ctx.session, *state->ctx.waiter, &fresh);
    // Another start's lease lapsed: it is taken only if this start continues that holder, which
    // this cluster's delivery counter must prove (delivery_counter.h); then connect again at once.
    jobbuf::redis::ContinuityEvidence evidence;
    if (report.status == SessionReport::Status::Held &&
        jobbuf::redis::drain_session_continuity_question(state->ctx.session, &evidence)) {
        bool continues = false;
        if (!run_guarded([&] { continues = continues_lease_holder(evidence); })) {
            pgstat_report_activity(STATE_IDLE, nullptr);
            database_failed();
            return false;
        }
        jobbuf::redis::drain_session_answer_continuity(state->ctx.session, continues);
        report = jobbuf::redis::drain_session_connect(state->ctx.session, *state->ctx.waiter, &fresh);
    }
    pgstat_report_activity(STATE_IDLE, nullptr);
    if (!session_call_succeeded(report))
        return false;
    if (fresh && !note_lease_taken()) {
        database_failed();
        return false;
    }
    note_free_lease_taken();
    if (fresh) {
        state->lease_kept_at = GetCurrentTimestamp();  // connecting took the lease
        state->lease_held_since = 0;
        report_recovered(ProblemKind::Lease, "this cluster holds the delivery lease now");
        cap_redis_backoff(static_cast<int>(lease_refresh_ms()));
        // Redis is said to accept jobs again once the reconciliation that follows succeeds, not
        // here: a Cluster healing after CLUSTERDOWN accepts a connection while some nodes still
        // refuse reads, and a recovery logged at each connect made one WARNING and one LOG per retry.
        state->reconcile_needed = true;  // a batch may have been cut off by the last disconnect
        state->targets_noted = false;    // another deployment may be behind the URL now
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
        redis_failed(state->ctx.session, report.message);
        return false;
    }
    state->reconcile_needed = !done;
    if (done)
        redis_succeeded(state->ctx.session);
    return done;
}

// Handles a batch that did not deliver: the next round reconciles (when part of the unit may be
// in Redis) after the backoff.
void batch_failed(const BatchResult& result)
{
    if (result.reconcile_needed)
        state->reconcile_needed = true;
    if (result.outcome != BatchOutcome::Interrupted)
        redis_failed(state->ctx.session, result.message);
}

// Nothing to drain until CREATE EXTENSION jobbuf, or until ALTER EXTENSION jobbuf UPDATE when the
// database still has an older version's SQL: say so once.
// - Missing: take what commits announced so far, so that the first commit after CREATE EXTENSION
//   finds the wake-up set empty and sets the worker's latch (a set left non-empty makes committers
//   send no wake-up); cursors start again from the head (a re-created extension numbers its jobs
//   from 1 again).
// - Outdated: leave the set as it is, so that the jobs staged meanwhile send no wake-up each (a
//   wake-up per commit for nothing); the update itself wakes the worker (it changes jobbuf.queues,
//   see jobbuf--1.0--1.1.sql), and the next round drains everything that waited.
void wait_for_installation(int why)
{
    if (why == kOutdatedExtension) {
        char message[kStatusErrorLen];
        snprintf(message, sizeof(message),
                 "database \"%s\" has jobbuf %s installed, this library needs %s: run ALTER EXTENSION jobbuf UPDATE "
                 "there; staged jobs wait until then",
                 drain_database_name(), installed_extension_version(), kJobbufSqlVersion);
        report_problem(ProblemKind::Config, message);
        return;
    }
    leave_unless_waiting_for_extension();
    report_problem(
        ProblemKind::Config,
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
    if (nqueues == kQueuesLocked)
        return -1;  // quietly: the next round asks again
    if (nqueues < 0) {
        wait_for_installation(nqueues);
        return -1;
    }
    report_recovered(ProblemKind::Config, "the jobbuf extension is installed and up to date; delivering");
    if (*reloaded)
        retry_failing_queues_now();
    if (jobbuf::redis::drain_session_set_marker_key(state->ctx.session, marker_key())) {
        state->reconcile_needed = true;
        // Another installation (DROP and CREATE EXTENSION): its own counter, from its own row.
        jobbuf::redis::drain_session_reset_counter(state->ctx.session, loaded_delivery_counter());
    }
    char client_name[sizeof(state->client_name)];
    worker_client_name(client_name, sizeof(client_name));
    if (strcmp(client_name, state->client_name) != 0) {
        strlcpy(state->client_name, client_name, sizeof(state->client_name));
        apply_settings();  // the next connection carries the name
    }
    if (jobbuf::redis::drain_session_set_lease(state->ctx.session, lease_key(), state->lease_value))
        state->reconcile_needed = true;
    if (*reloaded) {
        // Committed: the lease may carry it from the next refresh on.
        jobbuf::redis::drain_session_set_lease_counter(state->ctx.session, loaded_delivery_counter());
        if (loaded_take_over_request() && !state->take_over_pending) {
            state->take_over_pending = true;
            jobbuf::redis::drain_session_request_take_over(state->ctx.session);
            delay_redis_attempts(0);
        }
    }
    return nqueues;
}


// While it holds the lease, the worker advances the delivery counter at least once per lease
// lifetime (twice jobbuf.redis_timeout) even without batches, and the lease carries the committed
// value from the next refresh on: a copy of this cluster keeps the value it was copied with and
// so falls behind an idle original too (docs/copies.md). One small UPDATE (by address) when no
// batch wrote the counter for jobbuf.redis_timeout. Not while reconciliation is due: a marker
// above the committed counter may name jobs staged here, which a later start must still
// recognise (one behind it). False on a database error.
bool advance_counter_if_due(TimestampTz now)
{
    if (state->reconcile_needed ||
        !TimestampDifferenceExceeds(delivery_counter_written_at(), now, Max(jobbuf_redis_timeout, 1)))
        return true;
    int64 value = 0;
    if (!run_guarded([&] {
            begin_worker_transaction("jobbuf: advancing the delivery counter");
            value = advance_delivery_counter(jobbuf::redis::drain_session_counter(state->ctx.session) + 1);
            commit_worker_transaction();
        })) {
        database_failed();
        return false;
    }
    if (value > 0)
        jobbuf::redis::drain_session_set_lease_counter(state->ctx.session, value);
    return true;
}

// Refreshes the delivery lease when due. False when another cluster holds it (one WARNING per
// holder, through redis_failed) or Redis failed: nothing may be pushed now.
bool keep_lease(void)
{
    TimestampTz now = GetCurrentTimestamp();
    if (!TimestampDifferenceExceeds(state->lease_kept_at, now, static_cast<int>(lease_refresh_ms())))
        return true;
    if (!advance_counter_if_due(now))
        return false;
    SessionReport report = jobbuf::redis::drain_session_keep_lease(state->ctx.session, *state->ctx.waiter);
    if (!session_call_succeeded(report))
        return false;
    note_free_lease_taken();
    state->lease_kept_at = now;
    state->lease_held_since = 0;
    cap_redis_backoff(static_cast<int>(lease_refresh_ms()));
    return true;
}

// Marks the queues that commits staged into since the last look as pending (every queue on a
// full pass, and after the queue list was reloaded: a new or resumed queue may have jobs) and
// rewinds the cursors past the lowest id those commits staged.
void note_staged_work(const ActiveQueue* queues, int nqueues, bool all)
{
    StagedWork work = take_staged_work();
    // Each named queue's cursor goes back before the lowest id its commits staged; commits not
    // named exactly (or naming a queue not in the list: paused) rewind every cursor.
    if (!work.exact && work.lowest_id != PG_INT64_MAX)
        rewind_queue_cursors(work.lowest_id);
    for (int i = 0; i < work.count && work.exact; i++) {
        const ActiveQueue* q = active_queue_by_wake_hash(work.hashes[i]);
        if (q == nullptr) {
            rewind_queue_cursors(work.lowest_ids[i]);
            continue;
        }
        QueueProgress* progress = cached_queue_progress(q->name, &q->progress);
        rewind_queue_progress(progress, work.lowest_ids[i]);
    }
    bool marked = false;
    if (all && run_guarded([&] { marked = mark_queues_with_jobs(); }) && marked)
        return;  // (locked tables or an error: every queue, as below)
    if (!all && work.exact) {
        for (int i = 0; i < work.count; i++)
            if (const ActiveQueue* q = active_queue_by_wake_hash(work.hashes[i]))
                want_queue(q);
        return;
    }
    uint64 wanted = all ? PG_UINT64_MAX : work.queue_bits;
    for (int k = 0; k < nqueues; k++)
        if (wanted & queues[k].wake_bit)
            want_queue(&queues[k]);
}

// What jobbuf_flow_status() shows of a batch held back (status/queue_flow.h): noted in memory
// only, written between batches.
void note_held_back(const ActiveQueue* q, const BatchResult& result)
{
    char reason[256];
    switch (result.outcome) {
        case BatchOutcome::MemoryFull:
            note_flow_held(q->name, FlowHold::RedisMemory, -1,
                           result.message[0] != '\0' ? result.message : "Redis is at jobbuf.redis_memory_limit");
            break;
        case BatchOutcome::DepthCapped:
            snprintf(reason, sizeof(reason), "max_in_redis %lld reached",
                     jobbuf::redis::queue_target_max_in_redis(q->target));
            note_flow_held(q->name, FlowHold::DepthCap, result.depth_read ? result.depth : -1, reason);
            break;
        default:
            snprintf(reason, sizeof(reason), "max_rate %g jobs/s", jobbuf::redis::queue_target_max_rate(q->target));
            note_flow_held(q->name, FlowHold::RateLimited, -1, reason);
            break;
    }
}

// Which queues of the list the Redis in use refuses (stopped in jobbuf_flow_status()).
void note_refused_flows(const ActiveQueue* queues, int nqueues)
{
    char why[256];
    for (int k = 0; k < nqueues; k++) {
        bool refused = jobbuf::redis::drain_session_refuses_target(state->ctx.session, queues[k].target, why, sizeof(why));
        note_flow_refused(queues[k].name, refused ? why : nullptr);
    }
}

// Writes what jobbuf_flow_status() reads when due (between batches; a failure is retried later).
void publish_flow(void)
{
    if (!run_guarded([] { publish_flow_if_due(state->ctx.session); }))
        delay_redis_attempts(0);
}

// The depths of the pass's capped queues, in one round trip (depth_cap.h): of the pending queues
// it will try, in its order. False when that failed (reported as any Redis call is).
bool read_depths_of_pass(const ActiveQueue* queues, const int* order, int npending, TimestampTz pass_started)
{
    SessionReport report;
    // run_catching, not run_guarded: this reads no table, so its success says nothing of a
    // database problem another step has (no "resolved" line between two of its WARNINGs).
    if (!run_catching(
            [&] {
                auto* tried = static_cast<const ActiveQueue**>(palloc(sizeof(void*) * Max(npending, 1)));
                auto* progress = static_cast<QueueProgress**>(palloc(sizeof(void*) * Max(npending, 1)));
                int n = 0;
                for (int k = 0; k < npending; k++) {
                    const ActiveQueue* q = &queues[order[k]];
                    if (jobbuf::redis::queue_target_max_in_redis(q->target) <= 0 ||
                        queue_backing_off(q->name, pass_started) || target_refused(state->ctx.session, q))
                        continue;
                    tried[n] = q;
                    progress[n++] = cached_queue_progress(q->name, &q->progress);
                }
                report = read_pass_depths(&state->ctx, tried, progress, n);
                pfree(tried);
                pfree(progress);
            },
            [](const ErrorData* error) { report_problem(ProblemKind::Database, error->message); })) {
        database_failed();
        return false;
    }
    return session_call_succeeded(report);
}

// One wake-up's work: passes over the queues with new work, one batch (or group) per queue per
// pass, until none of them has a full batch left; each pass also takes the commits that arrived
// during the previous one, so a queue with a long backlog cannot hold back a queue with one new
// job. Returns the milliseconds to sleep before the next round.
long drain_round(void)
{
    long sleep_ms = jobbuf_poll_interval;
    TimestampTz now = GetCurrentTimestamp();
    if (next_redis_attempt() > now) {
        long wait_ms = (next_redis_attempt() - now) / 1000 + 1;
        return Min(wait_ms, sleep_ms);
    }

    bool delivered_any = false;
    bool locked_out = false;
    bool held_back = false;  // a queue waits for room in Redis (memory guard, depth cap)
    long rate_wait_ms = LONG_MAX;  // the soonest a rate-limited queue may push again
    for (bool more = true, first = true; more; first = false) {
        more = false;
        if (!first)
            publish_flow();  // a long round (a backlog elsewhere) still shows held queues as they are
        PassKind kind = start_pass(first);
        bool full = kind != PassKind::Changed;
        if (first)
            round_started();
        ActiveQueue* queues = nullptr;
        bool reloaded = false;
        int nqueues = load_pass(&queues, full, &reloaded);
        if (nqueues < 0)
            return sleep_ms;  // after an error, next_attempt holds the next round back
        if (reloaded)
            pending_queues_new_list(queues, nqueues);
        else if (full)
            pending_queues_clear();  // the restarted cursors left nothing pending
        note_staged_work(queues, nqueues, full || reloaded);
        if (nqueues == 0) {
            // No queue to deliver (none, or every one paused): a worker connected to Redis still
            // holds the delivery lease, and keeps it, or a clone beside it could take it.
            if (jobbuf::redis::drain_session_connected(state->ctx.session) && !keep_lease())
                return redis_backoff_ms();
            break;
        }
        if (!ensure_redis() || !keep_lease() || !reconcile_if_needed())
            return redis_backoff_ms();
        // Which targets this deployment refuses changes only with the list or the connection.
        if ((reloaded || !state->targets_noted) &&
            !run_guarded([&] { note_refused_targets(state->ctx.session, queues, nqueues); })) {
            database_failed();
            return kErrorBackoffMs;
        }
        state->targets_noted = true;
        note_refused_flows(queues, nqueues);

        uint32 start = state->next_pass_start++;
        TimestampTz pass_started = GetCurrentTimestamp();
        const int* order = nullptr;
        int npending = pending_queues_in_order(start, &order);
        state->ctx.pass++;
        if (!read_depths_of_pass(queues, order, npending, pass_started))
            return redis_backoff_ms();
        int batches_of_queue = 0;  // of queue order[k] in this pass: up to its weight
        int again = -1;            // the k that gets another batch
        for (int k = 0; k < npending; k++) {
            if (k != again)
                batches_of_queue = 0;
            again = -1;
            const ActiveQueue* q = &queues[order[k]];
            QueueProgress* progress = cached_queue_progress(q->name, &q->progress);
            if (!progress->pending || queue_backing_off(q->name, pass_started))
                continue;  // a queue backing off stays pending: tried again when its backoff ends
            if (target_refused(state->ctx.session, q)) {
                progress->pending = false;  // staged until the URL or the queue changes (a reload)
                continue;
            }
            CHECK_FOR_INTERRUPTS();
            reload_settings_if_asked();
            if (!jobbuf_enabled || drain_worker_must_leave())
                return sleep_ms;
            if (!keep_lease() || !reconcile_if_needed())
                return redis_backoff_ms();
            BatchResult result{};
            bool restarted = progress->restarted && !q->group_delivery;
            bool from_head = progress->after_id == 0;
            // An error is this queue's alone (its data, a trigger, a claim it cannot make): the
            // queue backs off and the pass goes on with the others, after reconciling the unit
            // the error may have cut off (the marker may name jobs Redis has).
            if (!run_catching(
                    [&] {
                        result = q->group_delivery ? drain_one_group(&state->ctx, q, progress)
                                                   : drain_one_batch(&state->ctx, q, progress);
                    },
                    [&](const ErrorData* error) {
                        queue_failed(q->name, error->message);
                        depth_unknown(q);  // its unit may have reached Redis before the error
                    })) {
                state->reconcile_needed = true;
                continue;
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
            if (result.outcome == BatchOutcome::MemoryFull || result.outcome == BatchOutcome::DepthCapped ||
                result.outcome == BatchOutcome::RateLimited)
                note_held_back(q, result);
            if (result.outcome == BatchOutcome::MemoryFull || result.outcome == BatchOutcome::DepthCapped) {
                // Its Redis is at its memory limit, or the queue at its max_in_redis: the queue
                // stays pending, the pass goes on with the others (another master of a Cluster may
                // have room), and the room is read again soon.
                progress->pending = true;
                held_back = true;
                continue;
            }
            if (result.outcome == BatchOutcome::RateLimited) {
                progress->pending = true;  // tried again when its bucket holds a job
                rate_wait_ms = Min(rate_wait_ms, result.wait_ms);
                continue;
            }
            switch (result.outcome) {
                case BatchOutcome::Full:
                case BatchOutcome::Partial:
                    delivered_any = true;
                    queue_succeeded(q->name);
                    // A queue of weight w gets w batches in a pass while it has full ones.
                    if (result.outcome == BatchOutcome::Full && ++batches_of_queue < q->weight) {
                        again = k--;
                        continue;
                    }
                    break;
                case BatchOutcome::Empty:
                    queue_succeeded(q->name);
                    break;
                case BatchOutcome::Locked:
                    locked_out = true;  // a full pass again shortly
                    break;
                default:
                    batch_failed(result);
                    return redis_backoff_ms();
            }
        }
    }
    round_finished(locked_out);
    if (delivered_any)
        redis_succeeded(state->ctx.session);
    // An idle worker keeps its lease (above, also with every queue paused): it wakes before a
    // quarter of its lifetime has passed.
    if (jobbuf::redis::drain_session_connected(state->ctx.session))
        sleep_ms = Min(sleep_ms, lease_refresh_ms());
    // A queue backing off after an error is tried again when its backoff ends.
    TimestampTz retry_at = next_queue_retry(GetCurrentTimestamp());
    if (retry_at != 0)
        sleep_ms = Min(sleep_ms, static_cast<long>((retry_at - GetCurrentTimestamp()) / 1000 + 1));
    if (held_back)
        sleep_ms = Min(sleep_ms, kHeldBackRecheckMs);
    sleep_ms = Min(sleep_ms, rate_wait_ms);
    return locked_out ? kMinBackoffMs : sleep_ms;
}

}  // namespace

extern "C" PGDLLEXPORT void jobbuf_drain_main(Datum arg);

void jobbuf_drain_main(Datum arg)
{
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    take_sigterm_as_terminate();  // die, and a note for the launcher: restart at once
    BackgroundWorkerUnblockSignals();
    join_drain_slot(arg);
    pgstat_report_appname("jobbuf drain worker");

    state = static_cast<WorkerState*>(MemoryContextAllocZero(TopMemoryContext, sizeof(WorkerState)));
    state->queue_cxt = AllocSetContextCreate(TopMemoryContext, "jobbuf queue list", ALLOCSET_SMALL_SIZES);
    state->ctx.session = jobbuf::redis::drain_session_create();
    if (state->ctx.session == nullptr)
        ereport(FATAL, (errmsg("jobbuf: out of memory creating the Redis session")));
    void* waiter_memory = MemoryContextAlloc(TopMemoryContext, sizeof(LatchIoWaiter));
    state->ctx.waiter = new (waiter_memory) LatchIoWaiter();
    state->reconcile_needed = true;
    worker_client_name(state->client_name, sizeof(state->client_name));
    worker_lease_value(state->lease_value, sizeof(state->lease_value));

    pin_worker_session();
    note_refused_remembered_settings();
    on_shmem_exit(unpublish_worker, (Datum)0);
    publish_worker();
    apply_settings();
    ereport(LOG, (errmsg("jobbuf: drain worker started in database \"%s\"", drain_database_name())));

    for (;;) {
        CHECK_FOR_INTERRUPTS();
        reload_settings_if_asked();
        if (drain_worker_must_leave()) {
            ereport(LOG,
                    (errmsg("jobbuf: drain worker leaves database \"%s\" for DROP DATABASE", drain_database_name())));
            note_departure_for_drop();
            proc_exit(0);
        }

        long sleep_ms = jobbuf_poll_interval;
        // While disabled, staged_queues stays non-empty: committers then skip the latch (a
        // wake-up per commit otherwise).
        if (jobbuf_enabled && !RecoveryInProgress()) {
            sleep_ms = drain_round();
            // Delivered jobs that an old snapshot keeps alive leave by TRUNCATE, not by vacuum.
            if (!run_guarded([] { rotate_storage_if_due(); }))
                sleep_ms = Min(sleep_ms, kErrorBackoffMs);
        }
        // Ticks are staged while delivery is disabled or Redis is down too: they wait as jobs.
        if (!run_guarded([] { stage_due_ticks_if_due(); }))
            sleep_ms = Min(sleep_ms, kErrorBackoffMs);
        sleep_ms = Min(sleep_ms, ticks_due_in_ms());
        // The census counts while delivery is disabled too: it is what monitoring reads.
        if (!run_guarded([] { take_census_if_due(); }))
            sleep_ms = Min(sleep_ms, kErrorBackoffMs);
        sleep_ms = Min(sleep_ms, census_due_in_ms());
        // Held-back queues and Redis memory readings for jobbuf_flow_status() and the exporter.
        if (!run_guarded([] { publish_flow_if_due(state->ctx.session); }))
            sleep_ms = Min(sleep_ms, kErrorBackoffMs);
        sleep_ms = Min(sleep_ms, flow_due_in_ms());

        if (state->ctx.waiter->take_wakeup() && next_redis_attempt() <= GetCurrentTimestamp())
            continue;  // a commit arrived while we talked to Redis: scan again
        // Waits on the Redis socket too: a connection that Redis closes while the worker idles
        // shows as such in jobbuf_worker_status() at once, not at the next batch.
        int socket = jobbuf::redis::drain_session_socket(state->ctx.session);
        int events = WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH | (socket >= 0 ? WL_SOCKET_READABLE : 0);
        int rc = WaitLatchOrSocket(MyLatch, events, socket, sleep_ms, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        if ((rc & WL_SOCKET_READABLE) && !jobbuf::redis::drain_session_check_open(state->ctx.session))
            connection_lost();
        if ((rc & WL_LATCH_SET) && my_drain_slot)
            pg_atomic_fetch_add_u64(&my_drain_slot->wakeups, 1);
    }
}
