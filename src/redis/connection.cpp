// RedisConnection: a non-blocking TCP or unix socket that we own, every wait delegated to an
// IoWaiter under a deadline (one per connect; per stretch without progress in a round trip),
// and hiredis's redisReader used only to parse replies.
// Pure C++ regime: every entry point is noexcept and reports a RedisStatus.
#include "redis/regime.h"

#include <charconv>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "redis/connection.h"

namespace jobbuf::redis {
namespace {

using Clock = std::chrono::steady_clock;
using Code = RedisStatus::Code;

constexpr std::size_t kReadChunk = 256 * 1024;
constexpr int kMaxIovecs = 64;

// How long a call may still wait. A connect (with its AUTH and SELECT) has one limit for the whole
// call. A round trip's limit restarts whenever it made progress: bytes written or read, or bytes
// the peer took from the socket's outgoing queue (written bytes wait there, a whole send
// buffer's worth on a slow link, before the peer reads them). A large transfer that keeps
// moving never times out; a peer that stops taking or sending bytes does after timeout_ms.
struct Deadline {
    enum class Kind { WholeCall, NoProgress };

    Clock::time_point at;
    long timeout_ms;
    Kind kind;
    long queued_for_peer = 0;  // the outgoing queue when the limit last restarted

    Deadline(long ms, Kind k) : at(limit_from_now(ms)), timeout_ms(ms), kind(k) {}

    static Clock::time_point limit_from_now(long ms)
    {
        return Clock::now() + std::chrono::milliseconds(ms > 0 ? ms : 0);
    }

    // Called after bytes were written or read, with the outgoing queue's size then.
    void progressed(long queued_now)
    {
        if (kind != Kind::NoProgress) return;
        at = limit_from_now(timeout_ms);
        queued_for_peer = queued_now;
    }

    // Called when the limit passed: true (and the limit restarts) if the peer took bytes from
    // the outgoing queue meanwhile.
    bool peer_took_bytes(long queued_now)
    {
        if (kind != Kind::NoProgress || queued_now >= queued_for_peer) return false;
        progressed(queued_now);
        return true;
    }

    long remaining_ms() const
    {
        auto left = std::chrono::duration_cast<std::chrono::microseconds>(at - Clock::now()).count();
        if (left <= 0) return 0;
        return static_cast<long>((left + 999) / 1000);
    }
};

// Building a failure status may itself run out of memory: then the message is left empty.
RedisStatus fail(Code code, const char* what, const std::string& detail = std::string()) noexcept
{
    RedisStatus st;
    st.code = code;
    try {
        st.message = what;
        if (!detail.empty()) {
            st.message += ": ";
            st.message += detail;
        }
        for (char& c : st.message)
            if (c == '\r' || c == '\n') c = ' ';
    } catch (...) {
        st.message.clear();
    }
    return st;
}

std::string errno_text(int err)
{
    return std::string(std::strerror(err));
}

// Bytes written to fd that the peer has not taken yet (TCP: not acknowledged; unix socket: not
// read). 0 if the kernel cannot tell, which only makes the round trip's limit stricter.
long queued_for_peer(int fd)
{
    int queued = 0;
    if (::ioctl(fd, SIOCOUTQ, &queued) != 0) return 0;
    return queued;
}

std::string ms_text(long ms)
{
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, ms);
    return std::string(buf, res.ptr) + " ms";
}

RedisStatus wait_for(IoWaiter& waiter, int fd, bool for_read, bool for_write, const Deadline& dl,
                     const char* doing)
{
    long ms = dl.remaining_ms();
    WaitResult r = ms > 0 ? waiter.wait(fd, for_read, for_write, ms) : WaitResult::TimedOut;
    switch (r) {
    case WaitResult::Ready:
        return RedisStatus::success();
    case WaitResult::Interrupted:
        return fail(Code::Interrupted, "interrupted while", doing);
    case WaitResult::TimedOut:
        break;
    }
    std::string what = "timed out after " + ms_text(dl.timeout_ms) +
                       (dl.kind == Deadline::Kind::NoProgress ? " without progress" : "") + " while " + doing;
    return fail(Code::Timeout, what.c_str());
}

// Completes a non-blocking connect of fd to addr.
RedisStatus finish_connect(int fd, const sockaddr* addr, socklen_t len, const Deadline& dl, IoWaiter& waiter)
{
    if (::connect(fd, addr, len) == 0) return RedisStatus::success();
    if (errno != EINPROGRESS && errno != EINTR) return fail(Code::ConnectFailed, errno_text(errno).c_str());
    for (;;) {
        RedisStatus st = wait_for(waiter, fd, false, true, dl, "connecting to Redis");
        if (!st.ok()) return st;
        int err = 0;
        socklen_t err_len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) err = errno;
        if (err != 0) return fail(Code::ConnectFailed, errno_text(err).c_str());
        sockaddr_storage peer;
        socklen_t peer_len = sizeof peer;
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0) return RedisStatus::success();
        if (errno != ENOTCONN) return fail(Code::ConnectFailed, errno_text(errno).c_str());
        // Woken before the connect finished: wait again.
    }
}

RedisStatus connect_unix(const RedisEndpoint& ep, const Deadline& dl, IoWaiter& waiter, int* out_fd)
{
    sockaddr_un addr;
    std::memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (ep.socket_path.size() >= sizeof addr.sun_path)
        return fail(Code::ConnectFailed, "unix socket path too long");
    std::memcpy(addr.sun_path, ep.socket_path.data(), ep.socket_path.size());
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(Code::ConnectFailed, "cannot create socket", errno_text(errno));
    RedisStatus st = finish_connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr, dl, waiter);
    if (!st.ok()) {
        ::close(fd);
        if (st.code == Code::ConnectFailed)
            st = fail(Code::ConnectFailed, ("cannot connect to Redis at " + ep.socket_path).c_str(), st.message);
        return st;
    }
    *out_fd = fd;
    return st;
}

struct AddrInfoFree {
    void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};

RedisStatus connect_tcp(const RedisEndpoint& ep, const Deadline& dl, IoWaiter& waiter, int* out_fd)
{
    char port[8];
    auto res = std::to_chars(port, port + sizeof port - 1, ep.port);
    *res.ptr = '\0';
    std::string where = "Redis at " + (ep.host.find(':') != std::string::npos ? "[" + ep.host + "]" : ep.host) +
                        ":" + port;

    addrinfo hints;
    std::memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* list = nullptr;
    int rc = getaddrinfo(ep.host.c_str(), port, &hints, &list);
    if (rc != 0) {
        std::string why = rc == EAI_SYSTEM ? errno_text(errno) : std::string(gai_strerror(rc));
        return fail(Code::ConnectFailed, ("cannot resolve " + where).c_str(), why);
    }
    std::unique_ptr<addrinfo, AddrInfoFree> owner(list);

    std::string last_error = "no address";
    for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
        int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last_error = errno_text(errno);
            continue;
        }
        RedisStatus st = finish_connect(fd, ai->ai_addr, ai->ai_addrlen, dl, waiter);
        if (st.ok()) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
            *out_fd = fd;
            return st;
        }
        ::close(fd);
        if (st.code != Code::ConnectFailed) return st;  // timeout or interrupt: the deadline is spent
        last_error = st.message;
    }
    return fail(Code::ConnectFailed, ("cannot connect to " + where).c_str(), last_error);
}

struct ReplyFree {
    void operator()(redisReply* r) const { freeReplyObject(r); }
};

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
            if (!convert_reply(in->element[i], &out->elements[i])) return false;
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
            return fail(Code::ProtocolError, "unparsable reply from Redis", reader->errstr);
        if (raw == nullptr) break;
        std::unique_ptr<redisReply, ReplyFree> reply(static_cast<redisReply*>(raw));
        replies->emplace_back();
        if (!convert_reply(reply.get(), &replies->back()))
            return fail(Code::ProtocolError, "unexpected reply type from Redis");
    }
    return RedisStatus::success();
}

// After the connection failed: the replies Redis sent before it closed the connection are still
// readable. Redis answers a request it can never accept (a bulk string longer than its
// proto-max-bulk-len) with "-ERR Protocol error: ..." and then closes the connection: that is
// a refusal of the request, not an outage, and is reported as such.
RedisStatus explain_closed_connection(int fd, redisReader* reader, std::size_t count,
                                      std::vector<RedisReply>* replies, RedisStatus failure)
{
    char buf[4096];
    for (;;) {
        ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || redisReaderFeed(reader, buf, static_cast<std::size_t>(n)) != REDIS_OK) break;
        if (!take_replies(reader, count, replies).ok()) break;
    }
    for (const RedisReply& reply : *replies)
        if (reply.is_error() && reply.str.rfind("ERR Protocol error", 0) == 0)
            return fail(Code::RequestRefused, "Redis refused the request and closed the connection", reply.str);
    return failure;
}

// Writes every piece of the batch and reads `count` replies, reading while it writes so that
// neither side can block the other on a full socket buffer. Every wait is bounded by dl, which
// hears of each byte moved.
RedisStatus round_trip(int fd, redisReader* reader, const CommandBatch& batch, std::size_t count,
                       std::vector<RedisReply>* replies, Deadline& dl, IoWaiter& waiter)
{
    replies->clear();
    replies->reserve(count);
    const std::vector<std::string_view> pieces = batch.pieces();
    std::size_t piece = 0, off = 0;  // the next byte to send: pieces[piece][off]
    std::unique_ptr<char[]> buf;
    for (;;) {
        bool moved = false;
        while (piece < pieces.size()) {
            iovec iov[kMaxIovecs];
            int n_iov = 0;
            for (std::size_t p = piece; p < pieces.size() && n_iov < kMaxIovecs; ++p, ++n_iov) {
                std::size_t skip = p == piece ? off : 0;
                iov[n_iov].iov_base = const_cast<char*>(pieces[p].data() + skip);
                iov[n_iov].iov_len = pieces[p].size() - skip;
            }
            msghdr msg;
            std::memset(&msg, 0, sizeof msg);
            msg.msg_iov = iov;
            msg.msg_iovlen = static_cast<std::size_t>(n_iov);
            ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
            if (n >= 0) {
                moved = moved || n > 0;
                std::size_t sent = static_cast<std::size_t>(n);
                while (piece < pieces.size() && sent >= pieces[piece].size() - off) {
                    sent -= pieces[piece].size() - off;
                    ++piece;
                    off = 0;
                }
                off += sent;
                if (n == 0 && piece < pieces.size()) break;
            } else if (errno == EINTR) {
                continue;
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                break;
            } else {
                return explain_closed_connection(fd, reader, count, replies,
                                                 fail(Code::IoError, "error writing to Redis", errno_text(errno)));
            }
        }
        while (replies->size() < count) {
            if (!buf) buf.reset(new char[kReadChunk]);
            ssize_t n = ::recv(fd, buf.get(), kReadChunk, 0);
            if (n > 0) {
                moved = true;
                if (redisReaderFeed(reader, buf.get(), static_cast<std::size_t>(n)) != REDIS_OK)
                    return fail(Code::ProtocolError, "unparsable reply from Redis", reader->errstr);
                RedisStatus st = take_replies(reader, count, replies);
                if (!st.ok()) return st;
            } else if (n == 0) {
                return explain_closed_connection(fd, reader, count, replies,
                                                 fail(Code::IoError, "Redis closed the connection"));
            } else if (errno == EINTR) {
                continue;
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                break;
            } else {
                return explain_closed_connection(fd, reader, count, replies,
                                                 fail(Code::IoError, "error reading from Redis", errno_text(errno)));
            }
        }
        bool want_read = replies->size() < count;
        bool want_write = piece < pieces.size();
        if (!want_read && !want_write) return RedisStatus::success();
        if (moved) dl.progressed(queued_for_peer(fd));
        RedisStatus st = wait_for(waiter, fd, want_read, want_write, dl,
                                  want_write ? "sending to Redis" : "waiting for Redis to reply");
        if (st.code == Code::Timeout && dl.peer_took_bytes(queued_for_peer(fd))) continue;
        if (!st.ok()) return st;
    }
}

// Redis error text made safe for a status message: one line, never the password.
std::string scrub(std::string text, const std::string& password)
{
    if (!password.empty()) {
        std::size_t pos;
        while ((pos = text.find(password)) != std::string::npos) text.replace(pos, password.size(), "***");
    }
    return text;
}

}  // namespace

RedisConnection::~RedisConnection()
{
    close();
}

void RedisConnection::close() noexcept
{
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    if (reader_ != nullptr) {
        redisReaderFree(static_cast<redisReader*>(reader_));
        reader_ = nullptr;
    }
}

RedisStatus RedisConnection::connect(const RedisEndpoint& endpoint, long timeout_ms, IoWaiter& waiter) noexcept
{
    close();
    try {
        Deadline dl(timeout_ms, Deadline::Kind::WholeCall);
        int fd = -1;
        RedisStatus st = endpoint.kind == RedisEndpoint::Kind::Unix ? connect_unix(endpoint, dl, waiter, &fd)
                                                                    : connect_tcp(endpoint, dl, waiter, &fd);
        if (!st.ok()) return st;
        fd_ = fd;
        reader_ = redisReaderCreate();
        if (reader_ == nullptr) {
            close();
            return fail(Code::ConnectFailed, "out of memory creating the Redis reply reader");
        }
        bool auth = !endpoint.password.empty();
        if (!auth && endpoint.db == 0) return st;

        char db[16];
        auto res = std::to_chars(db, db + sizeof db, endpoint.db);
        std::string_view db_text(db, static_cast<std::size_t>(res.ptr - db));
        CommandBatch hello;
        if (auth && endpoint.user.empty()) hello.add({"AUTH", endpoint.password});
        if (auth && !endpoint.user.empty()) hello.add({"AUTH", endpoint.user, endpoint.password});
        if (endpoint.db != 0) hello.add({"SELECT", db_text});
        std::vector<RedisReply> replies;
        st = round_trip(fd_, static_cast<redisReader*>(reader_), hello, hello.command_count(), &replies, dl,
                        waiter);
        if (!st.ok()) {
            close();
            return st;
        }
        std::size_t i = 0;
        if (auth && replies[i++].is_error()) {
            close();
            return fail(Code::AuthFailed, "AUTH", scrub(replies[0].str, endpoint.password));
        }
        if (endpoint.db != 0 && replies[i].is_error()) {
            close();
            return fail(Code::AuthFailed, ("SELECT " + std::string(db_text)).c_str(),
                        scrub(replies[i].str, endpoint.password));
        }
        return st;
    } catch (...) {
        close();
        return fail(Code::ConnectFailed, "out of memory while connecting to Redis");
    }
}

RedisStatus RedisConnection::execute(const CommandBatch& batch, std::vector<RedisReply>* replies, long timeout_ms,
                                     IoWaiter& waiter) noexcept
{
    try {
        if (fd_ < 0) return fail(Code::IoError, "not connected to Redis");
        std::vector<RedisReply> scratch;
        Deadline dl(timeout_ms, Deadline::Kind::NoProgress);
        RedisStatus st = round_trip(fd_, static_cast<redisReader*>(reader_), batch, batch.command_count(),
                                    replies != nullptr ? replies : &scratch, dl, waiter);
        if (!st.ok()) close();
        return st;
    } catch (...) {
        close();
        return fail(Code::IoError, "out of memory during a Redis round trip");
    }
}

}  // namespace jobbuf::redis
