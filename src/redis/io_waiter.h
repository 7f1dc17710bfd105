// Pure C++ regime: how the Redis connection waits for its socket. The Postgres side implements
// it over WaitLatchOrSocket so that the worker stays responsive (SIGTERM, SIGHUP, postmaster
// death) while Redis is slow; unit tests implement it with poll().
#pragma once

namespace jobbuf::redis {

enum class WaitResult { Ready, TimedOut, Interrupted };

class IoWaiter {
public:
    // Waits until fd is readable (for_read) or writable (for_write), at most timeout_ms.
    // Interrupted means the caller must give up now (shutdown requested): the connection is
    // then closed by the caller. Must not throw.
    virtual WaitResult wait(int fd, bool for_read, bool for_write, long timeout_ms) noexcept = 0;

protected:
    ~IoWaiter() = default;
};

}  // namespace jobbuf::redis
