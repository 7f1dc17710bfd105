// Pure C++ regime: the one place that picks a byte stream for an endpoint. It sits above the
// stream kinds (socket_stream.h, tls_stream.h), which sit above the ByteStream seam
// (byte_stream.h); the connection (connection.h) opens its stream here.
#pragma once
#include <memory>

#include "redis/endpoint.h"
#include "redis/io_waiter.h"
#include "redis/net/byte_stream.h"
#include "redis/net/io_deadline.h"

namespace jobbuf::redis {

// Opens the byte stream the endpoint asks for (the one place that chooses among stream kinds),
// within the deadline. On failure *stream is empty and the status says why.
RedisStatus open_byte_stream(const RedisEndpoint& endpoint, const IoDeadline& deadline, IoWaiter& waiter,
                             std::unique_ptr<ByteStream>* stream) noexcept;

}  // namespace jobbuf::redis
