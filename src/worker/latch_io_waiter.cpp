// Postgres regime: LatchIoWaiter, socket waits through WaitLatchOrSocket (see latch_io_waiter.h).
#include "pg_includes.h"

#include "worker/latch_io_waiter.h"

extern "C" {
#include "pgstat.h"
#include "portability/instr_time.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/wait_event.h"
}

using jobbuf::redis::WaitResult;

// One WaitLatchOrSocket and what it means for the Redis layer; *again when only the latch was
// set (a commit's wake-up): the wait goes on. May raise an ERROR (wait() catches it); never exits
// (postmaster death is WL_POSTMASTER_DEATH, not WL_EXIT_ON_PM_DEATH).
WaitResult LatchIoWaiter::wait_once(int fd, int events, long timeout_ms, bool* again)
{
    *again = false;
    int rc = WaitLatchOrSocket(MyLatch, events, fd, timeout_ms < 0 ? 0 : timeout_ms, PG_WAIT_EXTENSION);
    if (rc & WL_POSTMASTER_DEATH) {
        postmaster_died_ = true;
        return WaitResult::Interrupted;
    }
    if (rc & WL_LATCH_SET) {
        ResetLatch(MyLatch);
        wakeup_seen_ = true;
        // Shutdown, or a reload (which may point jobbuf.redis_url elsewhere): give up the
        // round trip; the connection is closed and the batch rolled back (and reconciled).
        if (ProcDiePending || ConfigReloadPending)
            return WaitResult::Interrupted;
    }
    if (rc & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
        return WaitResult::Ready;
    if (rc & WL_TIMEOUT)
        return WaitResult::TimedOut;
    *again = true;
    return WaitResult::TimedOut;
}

WaitResult LatchIoWaiter::wait(int fd, bool for_read, bool for_write, long timeout_ms) noexcept
{
    if (postmaster_died_ || caught_error_ != nullptr)
        return WaitResult::Interrupted;  // until raise_pending() ran
    const int events = WL_LATCH_SET | WL_TIMEOUT | WL_POSTMASTER_DEATH | (for_read ? WL_SOCKET_READABLE : 0) |
                       (for_write ? WL_SOCKET_WRITEABLE : 0);
    instr_time start;
    INSTR_TIME_SET_CURRENT(start);
    MemoryContext caller_cxt = CurrentMemoryContext;
    volatile WaitResult result = WaitResult::TimedOut;
    volatile long remaining = timeout_ms;
    PG_TRY();
    {
        for (;;) {
            bool again = false;
            result = wait_once(fd, events, remaining, &again);
            if (!again)
                break;
            instr_time now;
            INSTR_TIME_SET_CURRENT(now);
            INSTR_TIME_SUBTRACT(now, start);
            remaining = timeout_ms - static_cast<long>(INSTR_TIME_GET_MILLISEC(now));
            if (remaining <= 0) {
                result = WaitResult::TimedOut;
                break;
            }
        }
    }
    PG_CATCH();
    {
        // Kept (in the caller's memory context) for raise_pending, after the C++ frames unwound.
        MemoryContextSwitchTo(caller_cxt);
        caught_error_ = CopyErrorData();
        FlushErrorState();
        result = WaitResult::Interrupted;
    }
    PG_END_TRY();
    return result;
}

void LatchIoWaiter::raise_pending()
{
    if (postmaster_died_)
        proc_exit(1);  // as WL_EXIT_ON_PM_DEATH would have, but outside the C++ frames
    if (caught_error_ != nullptr) {
        ErrorData* error = caught_error_;
        caught_error_ = nullptr;
        ReThrowError(error);
    }
}
