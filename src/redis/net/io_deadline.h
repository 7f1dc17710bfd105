// Pure C++ regime: how long a Redis call may still wait (IoDeadline), the bounded wait on a
// socket through the IoWaiter, and failure statuses that are always one line.
#pragma once
#include <chrono>
#include <string>

#include "redis/io_waiter.h"
#include "redis/reply.h"

namespace jobbuf::redis {

// A connect (with its handshake, AUTH and SELECT) has one limit for the whole call (WholeCall).
// A round trip's limit restarts whenever it made progress (NoProgress): bytes written or read, or
// bytes the peer took from the socket's outgoing queue (written bytes wait there, a whole send
// buffer's worth on a slow link, before the peer reads them). A large transfer that keeps moving
// never times out; a peer that stops taking or sending bytes does after timeout_ms.
struct IoDeadline {
    using Clock = std::chrono::steady_clock;
    enum class Kind { WholeCall, NoProgress };

    Clock::time_point at;
    long timeout_ms;
    Kind kind;
    long queued_for_peer = 0;  // the outgoing queue when the limit last restarted

    IoDeadline(long ms, Kind k);

    // Called after bytes were written or read, with the outgoing queue's size then.
    void progressed(long queued_now);

    // Called when the limit passed: true (and the limit restarts) if the peer took bytes from
    // the outgoing queue meanwhile.
    bool peer_took_bytes(long queued_now);

    long remaining_ms() const;
};

// A failed status whose message is "what: detail" on one line (empty if memory ran out).
RedisStatus io_failure(RedisStatus::Code code, const char* what, const std::string& detail = std::string()) noexcept;

// strerror(err) as a string.
std::string errno_text(int err);

// Waits for fd under the deadline: Ok, Timeout ("timed out after N ms ... while <doing>") or
// Interrupted.
RedisStatus wait_for_socket(IoWaiter& waiter, int fd, bool for_read, bool for_write, const IoDeadline& deadline,
                            const char* doing);

}  // namespace jobbuf::redis
