// Postgres regime: LatchIoWaiter, socket waits through WaitLatchOrSocket (see latch_io_waiter.h).
#include "pg_includes.h"

#include "latch_io_waiter.h"

extern "C" {
#include "pgstat.h"
#include "portability/instr_time.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/wait_event.h"
}

using jobbuf::redis::WaitResult;

WaitResult LatchIoWaiter::wait(int fd, bool for_read, bool for_write, long timeout_ms) noexcept
{
    instr_time start;
    INSTR_TIME_SET_CURRENT(start);
    long remaining = timeout_ms;
    for (;;) {
        int events = WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH;
        if (for_read)
            events |= WL_SOCKET_READABLE;
        if (for_write)
            events |= WL_SOCKET_WRITEABLE;
        int rc = WaitLatchOrSocket(MyLatch, events, fd, remaining < 0 ? 0 : remaining, PG_WAIT_EXTENSION);
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

        instr_time now;
        INSTR_TIME_SET_CURRENT(now);
        INSTR_TIME_SUBTRACT(now, start);
        remaining = timeout_ms - static_cast<long>(INSTR_TIME_GET_MILLISEC(now));
        if (remaining <= 0)
            return WaitResult::TimedOut;
    }
}
