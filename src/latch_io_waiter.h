// Postgres regime: the IoWaiter the worker lends to the Redis layer. It waits on the socket and
// the process latch together, so SIGTERM, SIGHUP and postmaster death end a wait on a hung Redis
// at once.
#pragma once
#include "pg_includes.h"

#include "redis/io_waiter.h"

class LatchIoWaiter final : public jobbuf::redis::IoWaiter {
public:
    jobbuf::redis::WaitResult wait(int fd, bool for_read, bool for_write, long timeout_ms) noexcept override;

    // True when a latch wake-up (for example a committed job) arrived during a wait; the worker
    // then scans again instead of sleeping. Reading clears it.
    bool take_wakeup() { bool seen = wakeup_seen_; wakeup_seen_ = false; return seen; }

private:
    bool wakeup_seen_ = false;
};
