// Postgres regime: the IoWaiter the worker lends to the Redis layer. It waits on the socket and
// the process latch together, so SIGTERM, SIGHUP and postmaster death end a wait on a hung Redis
// at once.
//
// wait() is called from inside C++ frames of src/redis that own objects with destructors (the
// connection's buffers, a batch's wire pieces, the replies). No Postgres error or exit may leave
// it: an ERROR raised by WaitLatchOrSocket (out of memory, epoll failure) is caught and kept,
// postmaster death is noted, and wait() returns Interrupted; the C++ layer then unwinds normally
// (closing the connection), and the Postgres-regime caller calls raise_pending() once the
// drain_session_* call returned: it re-raises the kept ERROR, or exits for postmaster death.
// Interrupts (die, cancel, reload) are only looked at, never processed here: the worker's loop
// runs CHECK_FOR_INTERRUPTS outside any C++ frame.
#pragma once
#include "pg_includes.h"

#include "redis/io_waiter.h"

class LatchIoWaiter final : public jobbuf::redis::IoWaiter {
public:
    jobbuf::redis::WaitResult wait(int fd, bool for_read, bool for_write, long timeout_ms) noexcept override;

    // True when a latch wake-up (for example a committed job) arrived during a wait; the worker
    // then scans again instead of sleeping. Reading clears it.
    bool take_wakeup()
    {
        bool seen = wakeup_seen_;
        wakeup_seen_ = false;
        return seen;
    }

    // After a drain_session_* call: re-raises the ERROR a wait caught, or exits when the
    // postmaster died during a wait. Returns when neither happened.
    void raise_pending();

private:
    jobbuf::redis::WaitResult wait_once(int fd, int events, long timeout_ms, bool* again);

    bool wakeup_seen_ = false;
    bool postmaster_died_ = false;
    ErrorData* caught_error_ = nullptr;
};
