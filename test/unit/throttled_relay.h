// Unit-test support: a TCP relay on loopback between one client and a redis-server that moves
// bytes in small chunks with a pause after each, so that a round trip lasts as long as a test
// needs while bytes keep moving; either direction can stop moving after a number of bytes (a
// peer that stops answering).
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <limits>
#include <thread>

namespace jobbuf::test {

class ThrottledRelay {
public:
    struct Pace {
        std::size_t chunk_bytes;
        std::chrono::milliseconds pause;
    };

    ThrottledRelay(int server_port, Pace pace) : server_port_(server_port), pace_(pace) {}
    ThrottledRelay(const ThrottledRelay&) = delete;
    ThrottledRelay& operator=(const ThrottledRelay&) = delete;
    ~ThrottledRelay();

    // Listens on a loopback port and serves the first client that connects.
    bool start();
    int port() const { return port_; }

    // Stops forwarding in one direction once that many bytes went through it.
    void stall_to_server_after(std::size_t bytes) { to_server_.stall_after = bytes; }
    void stall_to_client_after(std::size_t bytes) { to_client_.stall_after = bytes; }

private:
    struct Direction {
        std::atomic<std::size_t> stall_after{std::numeric_limits<std::size_t>::max()};
        std::size_t moved = 0;
    };

    void serve();
    void pump(int from, int to, Direction& direction);

    int server_port_;
    Pace pace_;
    int port_ = 0;
    std::atomic<int> listen_fd_{-1}, client_fd_{-1}, server_fd_{-1};
    std::atomic<bool> stopping_{false};
    Direction to_server_, to_client_;
    std::thread serving_;
};

}  // namespace jobbuf::test
