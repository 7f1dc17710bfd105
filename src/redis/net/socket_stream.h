// Pure C++ regime: the plain byte stream, a non-blocking TCP or unix socket that jobbuf owns, and
// the connect that opens such a socket (which TLS reuses underneath its handshake).
#pragma once
#include <memory>

#include "redis/net/byte_stream.h"

namespace jobbuf::redis {

// Connects a non-blocking socket to the endpoint (TCP: every address the host resolves to, in
// turn, with TCP_NODELAY and keep-alive; or its unix socket) within the deadline.
RedisStatus connect_socket(const RedisEndpoint& endpoint, const IoDeadline& deadline, IoWaiter& waiter,
                           int* fd) noexcept;

// The stream over a connected socket; it owns (and closes) fd. Returns null when memory runs out
// (fd is then closed).
std::unique_ptr<ByteStream> make_socket_stream(int fd) noexcept;

}  // namespace jobbuf::redis
