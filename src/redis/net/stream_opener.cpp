// Pure C++ regime: the one place that picks a byte stream for an endpoint (see stream_opener.h).
// Each kind of stream has its own file beside this one: socket_stream (plain TCP or unix socket),
// tls_stream (rediss://). A Sentinel endpoint is located first (sentinel_locator.h).
#include "redis/regime.h"

#include "redis/net/socket_stream.h"
#include "redis/net/stream_opener.h"
#include "redis/net/tls_stream.h"

namespace jobbuf::redis {

RedisStatus open_byte_stream(const RedisEndpoint& endpoint, const IoDeadline& deadline, IoWaiter& waiter,
                             std::unique_ptr<ByteStream>* stream) noexcept
{
    stream->reset();
    if (endpoint.kind == RedisEndpoint::Kind::Sentinel)
        return io_failure(RedisStatus::Code::ConnectFailed, "a Sentinel endpoint must be located before connecting");
    if (endpoint.kind == RedisEndpoint::Kind::Cluster)
        return io_failure(RedisStatus::Code::ConnectFailed, "a Cluster endpoint connects to its nodes one by one");
    if (endpoint.tls)
        return open_tls_stream(endpoint, deadline, waiter, stream);
    int fd = -1;
    RedisStatus st = connect_socket(endpoint, deadline, waiter, &fd);
    if (!st.ok())
        return st;
    *stream = make_socket_stream(fd);
    if (!*stream)
        return io_failure(RedisStatus::Code::ConnectFailed, "out of memory while connecting to Redis");
    return st;
}

}  // namespace jobbuf::redis
