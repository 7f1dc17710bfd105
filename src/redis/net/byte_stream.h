// Pure C++ regime: ByteStream, the seam between the Redis protocol (connection.h) and how its
// bytes travel: a plain TCP or unix socket (socket_stream.h) today, TLS over that socket next.
// A stream is non-blocking; it never waits itself: it says which way it is blocked and the
// caller waits on fd() through its IoWaiter, under its deadline.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "redis/endpoint.h"
#include "redis/io_waiter.h"
#include "redis/net/io_deadline.h"

namespace jobbuf::redis {

// The result of one send or receive.
struct StreamIo {
    enum class State {
        Moved,    // `bytes` (> 0) were sent or received
        Blocked,  // nothing moved: wait until fd() is readable (want_read) / writable (want_write)
        Closed,   // the peer closed the stream (receive only)
        Failed,   // the stream is broken: `error` says why
    };
    State state = State::Blocked;
    std::size_t bytes = 0;
    bool want_read = false;
    bool want_write = false;
    std::string error;

    static StreamIo moved(std::size_t n) { return {State::Moved, n, false, false, {}}; }
    static StreamIo blocked(bool read, bool write) { return {State::Blocked, 0, read, write, {}}; }
};

class ByteStream {
public:
    virtual ~ByteStream() = default;

    // The socket to wait on.
    virtual int fd() const noexcept = 0;

    // Sends from the pieces, starting at pieces[0][offset]; may send less than all of them.
    virtual StreamIo send(const std::string_view* pieces, std::size_t count, std::size_t offset) noexcept = 0;

    // Receives up to len bytes into buf.
    virtual StreamIo receive(char* buf, std::size_t len) noexcept = 0;

    // Bytes given to the socket that the peer has not taken yet (0 when the kernel cannot tell):
    // lets a round trip tell a slow peer from a stalled one (IoDeadline::peer_took_bytes).
    virtual long queued_for_peer() const noexcept = 0;
};

}  // namespace jobbuf::redis
