// Postgres regime: the drain worker's pass plan (see pass_plan.h).
#include "pg_includes.h"

#include "config/settings.h"
#include "drain/pass_plan.h"
#include "drain/queue_progress.h"

extern "C" {
#include "utils/timestamp.h"
}

namespace {

// Full passes restart every cursor at its queue's floor, head passes at the head of the queue.
// While an old snapshot keeps the rows delivered since the last vacuum, walking past them costs
// more with every job delivered; both kinds of pass then come this many times their walking
// time apart (5% of the worker), but full passes at least once a minute (run_at coming due,
// rows another transaction held) and head passes at least every ten minutes (released claims
// and two-phase commits below a cursor).
constexpr int kRestartScanSpacing = 20;
constexpr int kMaxFullPassSpacingMs = 60 * 1000;
constexpr int kMaxHeadPassSpacingMs = 10 * 60 * 1000;

bool full_first_pass_due = true;  // the next round's first pass looks at every queue
TimestampTz next_full_pass = 0;   // ... and so does the first pass after this time
TimestampTz next_head_pass = 0;   // the first full pass after this time is a head pass
TimestampTz full_pass_started = 0;
TimestampTz head_pass_started = 0;
int64 full_scan_us = 0;  // the last full pass's first batches (from restarted cursors)
int64 head_scan_us = 0;  // the same for the last head pass

TimestampTz spaced_after(TimestampTz started, int64 scan_us, int max_spacing_ms)
{
    return started + Min(scan_us * kRestartScanSpacing, int64{max_spacing_ms} * 1000);
}

}  // namespace

// Whether this pass looks at every queue: on the first pass of a round after a round that did
// not finish (an error, a backoff, the worker disabled, tables locked), and on any pass once
// poll_interval has passed since the last full pass (jobs whose run_at came due, expired group
// leases, rows skipped as locked), even in the middle of a long round; a full pass is a head
// pass (commits the wake-up cannot see, such as COMMIT PREPARED, and released claims) once
// poll_interval has passed since the last one. Both are spaced out by note_restart_scan.
PassKind start_pass(bool first)
{
    TimestampTz now = GetCurrentTimestamp();
    if (!(first && full_first_pass_due) && now < next_full_pass)
        return PassKind::Changed;
    next_full_pass = TimestampTzPlusMilliseconds(now, jobbuf_poll_interval);
    full_pass_started = now;
    full_scan_us = 0;
    if (now < next_head_pass) {
        restart_queue_cursors_at_floor();
        return PassKind::Full;
    }
    next_head_pass = next_full_pass;
    head_pass_started = now;
    head_scan_us = 0;
    forget_queue_progress();
    return PassKind::Head;
}

void round_started(void)
{
    full_first_pass_due = true;
}

void round_finished(bool locked_out)
{
    full_first_pass_due = locked_out;
}

void note_restart_scan(int64 take_us, bool from_head)
{
    full_scan_us += take_us;
    next_full_pass = Max(next_full_pass, spaced_after(full_pass_started, full_scan_us, kMaxFullPassSpacingMs));
    if (from_head) {
        head_scan_us += take_us;
        next_head_pass = Max(next_head_pass, spaced_after(head_pass_started, head_scan_us, kMaxHeadPassSpacingMs));
    }
}
