// RedisConnection: the Redis protocol over a ByteStream (net/byte_stream.h: a plain socket, or
// TLS): AUTH and SELECT on connect, then pipelines written while their replies are read, every
// wait delegated to an IoWaiter under an IoDeadline, and hiredis's redisReader used only to
// parse replies. Pure C++ regime: every entry point is noexcept and reports a RedisStatus.
#include "redis/regime.h"

#include <charconv>
#include <memory>
#include <new>
#include <string>

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include "redis/connection.h"
#include "redis/free_with.h"
#include "redis/net/stream_opener.h"

namespace jobbuf::redis {
namespace {

using Code = RedisStatus::Code;

constexpr std::size_t kReadChunk = 256 * 1024;

bool convert_reply(const redisReply* in, RedisReply* out)
{
    switch (in->type) {
        case REDIS_REPLY_STRING:
            out->type = RedisReply::Type::String;
            out->str.assign(in->str, in->len);
            return true;
        case REDIS_REPLY_STATUS:
            out->type = RedisReply::Type::Status;
            out->str.assign(in->str, in->len);
            return true;
        case REDIS_REPLY_ERROR:
            out->type = RedisReply::Type::Error;
            out->str.assign(in->str, in->len);
            return true;
        case REDIS_REPLY_INTEGER:
            out->type = RedisReply::Type::Integer;
            out->integer = in->integer;
            return true;
        case REDIS_REPLY_NIL:
            out->type = RedisReply::Type::Nil;
            return true;
        case REDIS_REPLY_ARRAY:
            out->type = RedisReply::Type::Array;
            out->elements.resize(in->elements);
            for (std::size_t i = 0; i < in->elements; ++i)
                if (!convert_reply(in->element[i], &out->elements[i]))
                    return false;
            return true;
        default:
            return false;
    }
}

// Moves every complete reply out of the reader, up to `count` replies in total.
RedisStatus take_replies(redisReader* reader, std::size_t count, std::vector<RedisReply>* replies)
{
    while (replies->size() < count) {
        void* raw = nullptr;
        if (redisReaderGetReply(reader, &raw) != REDIS_OK)
            return io_failure(Code::ProtocolError, "unparsable reply from Redis", reader->errstr);
        if (raw == nullptr)
            break;
        std::unique_ptr<redisReply, FreeWith<freeReplyObject>> reply(static_cast<redisReply*>(raw));
        replies->emplace_back();
        if (!convert_reply(reply.get(), &replies->back()))
            return io_failure(Code::ProtocolError, "unexpected reply type from Redis");
    }
    return RedisStatus::success();
}

// After the connection failed: the replies Redis sent before it closed the connection are still
// readable. Redis answers a request it can never accept (a bulk string longer than its
// proto-max-bulk-len) with "-ERR Protocol error: ..." and then closes the connection: that is
// a refusal of the request, not an outage, and is reported as such.
RedisStatus explain_closed_connection(ByteStream& stream, redisReader* reader, std::size_t count,
                                      std::vector<RedisReply>* replies, RedisStatus failure)
{
    char buf[4096];
    for (;;) {
        StreamIo io = stream.receive(buf, sizeof buf);
        if (io.state != StreamIo::State::Moved || redisReaderFeed(reader, buf, io.bytes) != REDIS_OK)
            break;
        if (!take_replies(reader, count, replies).ok())
            break;
    }
    for (const RedisReply& reply : *replies)
        if (reply.is_error() && reply.str.rfind("ERR Protocol error", 0) == 0)
            return io_failure(Code::RequestRefused, "Redis refused the request and closed the connection", reply.str);
    return failure;
}

// Writes every piece of the pipeline and reads `count` replies, reading while it writes so that
// neither side can block the other on a full socket buffer. Every wait is bounded by dl, which
// hears of each byte moved; it waits for what the blocked operations asked for (a TLS write may
// need to read first).
RedisStatus round_trip(ByteStream& stream, redisReader* reader, const CommandPipeline& pipeline, std::size_t count,
                       std::vector<RedisReply>* replies, IoDeadline& dl, IoWaiter& waiter,
                       const CommandPipeline* then = nullptr)
{
    replies->clear();
    replies->reserve(count);
    std::vector<std::string_view> pieces = pipeline.pieces();
    if (then != nullptr) {
        std::vector<std::string_view> more = then->pieces();
        pieces.insert(pieces.end(), more.begin(), more.end());
    }
    std::size_t piece = 0, off = 0;  // the next byte to send: pieces[piece][off]
    std::unique_ptr<char[]> buf;
    for (;;) {
        bool moved = false;
        StreamIo send_blocked, receive_blocked;
        while (piece < pieces.size()) {
            StreamIo io = stream.send(&pieces[piece], pieces.size() - piece, off);
            if (io.state == StreamIo::State::Blocked) {
                send_blocked = io;
                break;
            }
            if (io.state != StreamIo::State::Moved)
                return explain_closed_connection(stream, reader, count, replies,
                                                 io_failure(Code::IoError, io.error.empty()
                                                                               ? "Redis closed the connection"
                                                                               : io.error.c_str()));
            moved = true;
            std::size_t sent = io.bytes;
            while (piece < pieces.size() && sent >= pieces[piece].size() - off) {
                sent -= pieces[piece].size() - off;
                ++piece;
                off = 0;
            }
            off += sent;
        }
        while (replies->size() < count) {
            if (!buf)
                buf.reset(new char[kReadChunk]);
            StreamIo io = stream.receive(buf.get(), kReadChunk);
            if (io.state == StreamIo::State::Blocked) {
                receive_blocked = io;
                break;
            }
            if (io.state == StreamIo::State::Closed)
                return explain_closed_connection(stream, reader, count, replies,
                                                 io_failure(Code::IoError, "Redis closed the connection"));
            if (io.state == StreamIo::State::Failed)
                return explain_closed_connection(stream, reader, count, replies,
                                                 io_failure(Code::IoError, io.error.c_str()));
            moved = true;
            if (redisReaderFeed(reader, buf.get(), io.bytes) != REDIS_OK)
                return io_failure(Code::ProtocolError, "unparsable reply from Redis", reader->errstr);
            RedisStatus st = take_replies(reader, count, replies);
            if (!st.ok())
                return st;
        }
        bool need_read = replies->size() < count;
        bool need_write = piece < pieces.size();
        if (!need_read && !need_write)
            return RedisStatus::success();
        if (moved)
            dl.progressed(stream.queued_for_peer());
        bool wait_read = (need_read && receive_blocked.want_read) || (need_write && send_blocked.want_read);
        bool wait_write = (need_read && receive_blocked.want_write) || (need_write && send_blocked.want_write);
        RedisStatus st = wait_for_socket(waiter, stream.fd(), wait_read, wait_write, dl,
                                         need_write ? "sending to Redis" : "waiting for Redis to reply");
        if (st.code == Code::Timeout && dl.peer_took_bytes(stream.queued_for_peer()))
            continue;
        if (!st.ok())
            return st;
    }
}

// Redis error text made safe for a status message: one line, never the password.
std::string scrub(std::string text, const std::string& password)
{
    if (!password.empty()) {
        std::size_t pos;
        while ((pos = text.find(password)) != std::string::npos)
            text.replace(pos, password.size(), "***");
    }
    return text;
}

}  // namespace

RedisConnection::~RedisConnection()
{
    close();
}

bool RedisConnection::still_open() noexcept
{
    if (!stream_)
        return false;
    try {
        char buf[512];
        if (stream_->receive(buf, sizeof(buf)).state == StreamIo::State::Blocked)
            return true;
    } catch (...) {
    }
    close();
    return false;
}

void RedisConnection::close() noexcept
{
    stream_.reset();
    if (reader_ != nullptr) {
        redisReaderFree(static_cast<redisReader*>(reader_));
        reader_ = nullptr;
    }
}

RedisStatus RedisConnection::connect(const RedisEndpoint& endpoint, long timeout_ms, IoWaiter& waiter) noexcept
{
    close();
    try {
        IoDeadline dl(timeout_ms, IoDeadline::Kind::WholeCall);
        RedisStatus st = open_byte_stream(endpoint, dl, waiter, &stream_);
        if (!st.ok())
            return st;
        reader_ = redisReaderCreate();
        if (reader_ == nullptr) {
            close();
            return io_failure(Code::ConnectFailed, "out of memory creating the Redis reply reader");
        }
        bool auth = !endpoint.password.empty();
        if (!auth && endpoint.db == 0)
            return st;

        char db[16];
        auto res = std::to_chars(db, db + sizeof db, endpoint.db);
        std::string_view db_text(db, static_cast<std::size_t>(res.ptr - db));
        CommandPipeline hello;
        if (auth && endpoint.user.empty())
            hello.add({"AUTH", endpoint.password});
        if (auth && !endpoint.user.empty())
            hello.add({"AUTH", endpoint.user, endpoint.password});
        if (endpoint.db != 0)
            hello.add({"SELECT", db_text});
        std::vector<RedisReply> replies;
        st = round_trip(*stream_, static_cast<redisReader*>(reader_), hello, hello.command_count(), &replies, dl,
                        waiter);
        if (!st.ok()) {
            close();
            return st;
        }
        std::size_t i = 0;
        if (auth && replies[i++].is_error()) {
            close();
            return io_failure(Code::AuthFailed, "AUTH", scrub(replies[0].str, endpoint.password));
        }
        if (endpoint.db != 0 && replies[i].is_error()) {
            close();
            return io_failure(Code::AuthFailed, ("SELECT " + std::string(db_text)).c_str(),
                              scrub(replies[i].str, endpoint.password));
        }
        return st;
    } catch (...) {
        close();
        return io_failure(Code::ConnectFailed, "out of memory while connecting to Redis");
    }
}

RedisStatus RedisConnection::execute(const CommandPipeline& pipeline, std::vector<RedisReply>* replies, long timeout_ms,
                                     IoWaiter& waiter, const CommandPipeline* then) noexcept
{
    try {
        if (!stream_)
            return io_failure(Code::IoError, "not connected to Redis");
        std::vector<RedisReply> scratch;
        IoDeadline dl(timeout_ms, IoDeadline::Kind::NoProgress);
        std::size_t count = pipeline.command_count() + (then != nullptr ? then->command_count() : 0);
        RedisStatus st = round_trip(*stream_, static_cast<redisReader*>(reader_), pipeline, count,
                                    replies != nullptr ? replies : &scratch, dl, waiter, then);
        if (!st.ok())
            close();
        return st;
    } catch (...) {
        close();
        return io_failure(Code::IoError, "out of memory during a Redis round trip");
    }
}

}  // namespace jobbuf::redis
