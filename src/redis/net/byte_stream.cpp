// Pure C++ regime: the one place that picks a byte stream for an endpoint (see byte_stream.h).
// A new kind of stream (TLS) is one more branch here and its own file beside socket_stream.
#include "redis/regime.h"

#include "redis/net/byte_stream.h"
#include "redis/net/socket_stream.h"

namespace jobbuf::redis {

RedisStatus open_byte_stream(const RedisEndpoint& endpoint, const IoDeadline& deadline, IoWaiter& waiter,
                             std::unique_ptr<ByteStream>* stream) noexcept
{
    stream->reset();
    int fd = -1;
    RedisStatus st = connect_socket(endpoint, deadline, waiter, &fd);
    if (!st.ok()) return st;
    *stream = make_socket_stream(fd);
    if (!*stream) return io_failure(RedisStatus::Code::ConnectFailed, "out of memory while connecting to Redis");
    return st;
}

}  // namespace jobbuf::redis
