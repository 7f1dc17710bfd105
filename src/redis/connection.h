// Pure C++ regime: one connection to Redis, the protocol over a ByteStream (net/byte_stream.h)
// with hiredis used only as the RESP reply parser. Every call is noexcept and reports a RedisStatus.
#pragma once
#include <memory>
#include <vector>

#include "redis/command_pipeline.h"
#include "redis/endpoint.h"
#include "redis/io_waiter.h"
#include "redis/net/byte_stream.h"
#include "redis/reply.h"

namespace jobbuf::redis {

class RedisConnection {
public:
    RedisConnection() = default;
    ~RedisConnection();
    RedisConnection(const RedisConnection&) = delete;
    RedisConnection& operator=(const RedisConnection&) = delete;

    // Opens the endpoint's byte stream (net/byte_stream.h), then AUTH [user] password and SELECT db when the endpoint
    // asks for them. timeout_ms bounds the whole call. Closes any previous connection first.
    RedisStatus connect(const RedisEndpoint& endpoint, long timeout_ms, IoWaiter& waiter) noexcept;

    // Writes every command of the pipeline and reads exactly one reply per command, in order.
    // timeout_ms bounds each wait for progress: the call times out only after timeout_ms in
    // which no byte was written or read, so a large pipeline that keeps moving always completes.
    // Any non-Ok status closes the connection (the stream position is unknown after a partial
    // exchange).
    // `then`, when given, is sent right after pipeline in the same round trip (its replies follow).
    RedisStatus execute(const CommandPipeline& pipeline, std::vector<RedisReply>* replies, long timeout_ms,
                        IoWaiter& waiter, const CommandPipeline* then = nullptr) noexcept;

    bool connected() const { return stream_ != nullptr; }
    void close() noexcept;

    // The socket to wait on between requests (-1 when not connected).
    int fd() const noexcept { return stream_ ? stream_->fd() : -1; }

    // Between requests Redis sends nothing until it closes the connection (shutdown, timeout,
    // CLIENT KILL): reads what the socket holds without waiting. False, and closed, when the peer
    // closed it, it failed, or bytes arrived; true when nothing did (TLS records of its own).
    bool still_open() noexcept;

private:
    std::unique_ptr<ByteStream> stream_;
    void* reader_ = nullptr;  // redisReader*
};

}  // namespace jobbuf::redis
