// Pure C++ regime: the plain TCP / unix socket byte stream and its connect (see socket_stream.h).
#include "redis/regime.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "redis/free_with.h"
#include "redis/net/socket_stream.h"

namespace jobbuf::redis {
namespace {

using Code = RedisStatus::Code;

constexpr int kMaxIovecs = 64;

// Completes a non-blocking connect of fd to addr.
RedisStatus finish_connect(int fd, const sockaddr* addr, socklen_t len, const IoDeadline& dl, IoWaiter& waiter)
{
    if (::connect(fd, addr, len) == 0)
        return RedisStatus::success();
    if (errno != EINPROGRESS && errno != EINTR)
        return io_failure(Code::ConnectFailed, errno_text(errno).c_str());
    for (;;) {
        RedisStatus st = wait_for_socket(waiter, fd, false, true, dl, "connecting to Redis");
        if (!st.ok())
            return st;
        int err = 0;
        socklen_t err_len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0)
            err = errno;
        if (err != 0)
            return io_failure(Code::ConnectFailed, errno_text(err).c_str());
        sockaddr_storage peer;
        socklen_t peer_len = sizeof peer;
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0)
            return RedisStatus::success();
        if (errno != ENOTCONN)
            return io_failure(Code::ConnectFailed, errno_text(errno).c_str());
        // Woken before the connect finished: wait again.
    }
}

RedisStatus connect_unix(const RedisEndpoint& ep, const IoDeadline& dl, IoWaiter& waiter, int* out_fd)
{
    sockaddr_un addr;
    std::memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (ep.socket_path.size() >= sizeof addr.sun_path)
        return io_failure(Code::ConnectFailed, "unix socket path too long");
    std::memcpy(addr.sun_path, ep.socket_path.data(), ep.socket_path.size());
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return io_failure(Code::ConnectFailed, "cannot create socket", errno_text(errno));
    RedisStatus st = finish_connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr, dl, waiter);
    if (!st.ok()) {
        ::close(fd);
        if (st.code == Code::ConnectFailed)
            st = io_failure(Code::ConnectFailed, ("cannot connect to Redis at " + ep.socket_path).c_str(), st.message);
        return st;
    }
    *out_fd = fd;
    return st;
}

RedisStatus connect_tcp(const RedisEndpoint& ep, const IoDeadline& dl, IoWaiter& waiter, int* out_fd)
{
    char port[8];
    auto res = std::to_chars(port, port + sizeof port - 1, ep.port);
    *res.ptr = '\0';
    std::string where =
        "Redis at " + (ep.host.find(':') != std::string::npos ? "[" + ep.host + "]" : ep.host) + ":" + port;

    addrinfo hints;
    std::memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* list = nullptr;
    int rc = getaddrinfo(ep.host.c_str(), port, &hints, &list);
    if (rc != 0) {
        std::string why = rc == EAI_SYSTEM ? errno_text(errno) : std::string(gai_strerror(rc));
        return io_failure(Code::ConnectFailed, ("cannot resolve " + where).c_str(), why);
    }
    std::unique_ptr<addrinfo, FreeWith<freeaddrinfo>> owner(list);

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
        if (st.code != Code::ConnectFailed)
            return st;  // timeout or interrupt: the deadline is spent
        last_error = st.message;
    }
    return io_failure(Code::ConnectFailed, ("cannot connect to " + where).c_str(), last_error);
}

StreamIo failed(const char* what, int err)
{
    StreamIo io;
    io.state = StreamIo::State::Failed;
    try {
        io.error = std::string(what) + ": " + errno_text(err);
    } catch (...) {
    }
    return io;
}

class SocketStream final : public ByteStream {
public:
    explicit SocketStream(int fd) : fd_(fd) {}
    ~SocketStream() override { ::close(fd_); }

    int fd() const noexcept override { return fd_; }

    // One sendmsg gathers up to kMaxIovecs pieces.
    StreamIo send(const std::string_view* pieces, std::size_t count, std::size_t offset) noexcept override
    {
        iovec iov[kMaxIovecs];
        int n_iov = 0;
        for (std::size_t p = 0; p < count && n_iov < kMaxIovecs; ++p, ++n_iov) {
            std::size_t skip = p == 0 ? offset : 0;
            iov[n_iov].iov_base = const_cast<char*>(pieces[p].data() + skip);
            iov[n_iov].iov_len = pieces[p].size() - skip;
        }
        msghdr msg;
        std::memset(&msg, 0, sizeof msg);
        msg.msg_iov = iov;
        msg.msg_iovlen = static_cast<std::size_t>(n_iov);
        for (;;) {
            ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
            if (n > 0)
                return StreamIo::moved(static_cast<std::size_t>(n));
            if (n == 0)
                return StreamIo::blocked(false, true);
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return StreamIo::blocked(false, true);
            return failed("error writing to Redis", errno);
        }
    }

    StreamIo receive(char* buf, std::size_t len) noexcept override
    {
        for (;;) {
            ssize_t n = ::recv(fd_, buf, len, 0);
            if (n > 0)
                return StreamIo::moved(static_cast<std::size_t>(n));
            if (n == 0)
                return StreamIo{StreamIo::State::Closed, 0, false, false, {}};
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return StreamIo::blocked(true, false);
            return failed("error reading from Redis", errno);
        }
    }

    long queued_for_peer() const noexcept override { return socket_bytes_queued(fd_); }

private:
    int fd_;
};

}  // namespace

RedisStatus connect_socket(const RedisEndpoint& endpoint, const IoDeadline& deadline, IoWaiter& waiter,
                           int* fd) noexcept
{
    try {
        return endpoint.kind == RedisEndpoint::Kind::Unix ? connect_unix(endpoint, deadline, waiter, fd)
                                                          : connect_tcp(endpoint, deadline, waiter, fd);
    } catch (...) {
        return io_failure(Code::ConnectFailed, "out of memory while connecting to Redis");
    }
}

long socket_bytes_queued(int fd) noexcept
{
    int queued = 0;
    if (::ioctl(fd, SIOCOUTQ, &queued) != 0)
        return 0;
    return queued;
}

std::unique_ptr<ByteStream> make_socket_stream(int fd) noexcept
{
    ByteStream* stream = new (std::nothrow) SocketStream(fd);
    if (stream == nullptr)
        ::close(fd);
    return std::unique_ptr<ByteStream>(stream);
}

}  // namespace jobbuf::redis
