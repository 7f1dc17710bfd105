// Unit-test support: the throttled loopback TCP relay (see throttled_relay.h).
#include "throttled_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace jobbuf::test {
namespace {

sockaddr_in loopback(int port)
{
    sockaddr_in addr;
    std::memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    return addr;
}

bool write_all(int fd, const char* data, std::size_t len)
{
    while (len > 0) {
        ssize_t n = ::send(fd, data, len, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        data += n;
        len -= static_cast<std::size_t>(n);
    }
    return true;
}

void close_fd(std::atomic<int>& fd)
{
    int old = fd.exchange(-1);
    if (old >= 0)
        ::close(old);
}

}  // namespace

bool ThrottledRelay::start()
{
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    listen_fd_ = fd;
    // A small receive buffer, inherited by the accepted socket: the client's writes wait on
    // the relay's pace instead of filling a large kernel buffer.
    int small = 32 * 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in addr = loopback(0);
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 1) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        return false;
    port_ = ntohs(addr.sin_port);
    serving_ = std::thread([this] { serve(); });
    return true;
}

void ThrottledRelay::serve()
{
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0)
        return;
    client_fd_ = client;
    if (stopping_)
        return;  // the destructor may have looked at client_fd_ before it was set
    int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (server < 0)
        return;
    server_fd_ = server;
    if (stopping_)
        return;
    sockaddr_in addr = loopback(server_port_);
    if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
        return;
    std::thread replies([this, server, client] { pump(server, client, to_client_); });
    pump(client, server, to_server_);
    replies.join();
}

void ThrottledRelay::pump(int from, int to, Direction& direction)
{
    std::vector<char> buf(pace_.chunk_bytes);
    while (!stopping_) {
        std::size_t allowed = direction.stall_after - std::min<std::size_t>(direction.moved, direction.stall_after);
        if (allowed == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            continue;
        }
        ssize_t n = ::recv(from, buf.data(), std::min(buf.size(), allowed), 0);
        if (n <= 0 || !write_all(to, buf.data(), static_cast<std::size_t>(n)))
            break;
        direction.moved += static_cast<std::size_t>(n);
        std::this_thread::sleep_for(pace_.pause);
    }
    ::shutdown(to, SHUT_WR);
}

ThrottledRelay::~ThrottledRelay()
{
    stopping_ = true;
    for (std::atomic<int>* fd : {&listen_fd_, &client_fd_, &server_fd_})
        if (*fd >= 0)
            ::shutdown(*fd, SHUT_RDWR);
    if (serving_.joinable())
        serving_.join();
    for (std::atomic<int>* fd : {&listen_fd_, &client_fd_, &server_fd_})
        close_fd(*fd);
}

}  // namespace jobbuf::test
