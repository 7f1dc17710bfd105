// Unit-test support: a poll()-based IoWaiter, an interrupting one, a private redis-server
// started on a free loopback port and a unix socket in a temporary directory (verified to be the
// server answering on that port), and a test fixture connected to one.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "redis/connection.h"
#include "redis/delivery.h"
#include "redis/targets/target_registry.h"

namespace jobbuf::test {

class PollWaiter final : public redis::IoWaiter {
public:
    redis::WaitResult wait(int fd, bool for_read, bool for_write, long timeout_ms) noexcept override;
    int calls = 0;
};

// Waits like PollWaiter for the first `allowed` calls, then answers Interrupted.
class InterruptingWaiter final : public redis::IoWaiter {
public:
    explicit InterruptingWaiter(int allowed) : allowed_(allowed) {}
    redis::WaitResult wait(int fd, bool for_read, bool for_write, long timeout_ms) noexcept override;
    int interrupts = 0;

private:
    int allowed_;
    PollWaiter poll_;
};

// Milliseconds since `since` on the steady clock.
long elapsed_ms(std::chrono::steady_clock::time_point since);

// A loopback TCP port nothing listens on (bound to port 0, read back, released).
int free_port();

class RedisServer {
public:
    RedisServer() = default;
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;
    ~RedisServer() { stop(); }

    // Starts redis-server with extra arguments on a free loopback port; waits until it answers (at
    // most 10 s a try) and until 127.0.0.1:port() answers as that very process (INFO server's
    // process_id and run_id, compared with what the private unix socket answers). Between
    // free_port() and the server's bind another process (another test run's server) can take the
    // port: the server then exits with "Address already in use", or another server answers on the
    // port; either way it starts again on a new port, at most 5 tries. On failure adds a gtest
    // failure naming the reason and returns false (error() keeps it).
    bool start(const std::vector<std::string>& extra_args = {});
    void stop();
    const std::string& error() const { return error_; }

    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    const std::string& socket_path() const { return socket_path_; }
    std::string url(std::string_view credentials = {}, int db = 0) const;

private:
    enum class Launch { Started, PortTaken, Failed };
    // One try: a new directory and port, the child started and checked; sets error_ unless Started.
    Launch launch(const std::vector<std::string>& extra_args);
    // Whether 127.0.0.1:tcp_port answers as the child (unix socket's run_id and our pid); sets error_.
    Launch check_tcp_identity(int tcp_port, const std::string& password);

    pid_t pid_ = -1;
    int port_ = 0;
    std::string dir_;
    std::string socket_path_;
    std::string error_;
};

// Connects to url (ASSERT-style failures are reported through gtest) and returns the status.
redis::RedisStatus connect_url(redis::RedisConnection& conn, const std::string& url, long timeout_ms = 2000);

// Runs one command on conn and returns its reply (a test failure and a Nil reply if the round
// trip failed).
redis::RedisReply command(redis::RedisConnection& conn, std::initializer_list<std::string_view> args);

// Plans one batch for target, runs it on conn and reads the outcomes (gtest failures when the
// plan or the round trip fail); returns read_delivery's result.
bool deliver_batch(redis::RedisConnection& conn, const redis::QueueTarget& target,
                   const std::vector<redis::StagedJob>& jobs, std::vector<redis::JobOutcome>* outcomes,
                   std::string* error, double now, std::string_view marker_key = "jobbuf:marker:test");

// A target made the way the worker makes it: by name, for queue `queue`, from option text pairs.
std::unique_ptr<jobbuf::redis::QueueTarget>
make_target(std::string_view name, std::initializer_list<std::pair<const char*, const char*>> options = {},
            std::string_view queue = "q");

// Expects outcomes[0] Delivered and every later outcome Rejected with an error containing
// `error_part`.
void expect_first_delivered_rest_rejected(const std::vector<redis::JobOutcome>& outcomes, std::string_view error_part);

// A fixture with a private redis-server started for each test and a connection to it, and a
// clock: `now` (epoch seconds) is when deliver() delivers, jobs_from stages jobs 100 s before.
class RedisServerTest : public ::testing::Test {
protected:
    explicit RedisServerTest(double now = 1700000100.0) : now_(now) {}
    void SetUp() override;

    // One job per payload, ids from first_id on, with id_salt, staged and due at now - 100 s. The
    // jobs view the payload strings.
    std::vector<redis::StagedJob> jobs_from(const std::vector<std::string>& payloads, std::int64_t first_id,
                                            std::uint32_t id_salt = 0) const;

    // Delivers one batch at now (deliver_batch) and returns the outcomes; a test failure if it fails.
    std::vector<redis::JobOutcome> deliver(const redis::QueueTarget& target, const std::vector<redis::StagedJob>& jobs);

    const double now_;
    RedisServer server_;
    redis::RedisConnection conn_;
};

}  // namespace jobbuf::test
