// Unit-test support: poll()-based waiters and a private redis-server per test, verified to be the
// server that answers on its loopback port.
#include "test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

namespace jobbuf::test {

using redis::WaitResult;

WaitResult PollWaiter::wait(int fd, bool for_read, bool for_write, long timeout_ms) noexcept
{
    ++calls;
    pollfd p;
    p.fd = fd;
    p.events = static_cast<short>((for_read ? POLLIN : 0) | (for_write ? POLLOUT : 0));
    p.revents = 0;
    int rc = ::poll(&p, 1, static_cast<int>(timeout_ms));
    if (rc == 0)
        return WaitResult::TimedOut;
    return WaitResult::Ready;  // ready, error or EINTR: the caller retries its operation
}

WaitResult InterruptingWaiter::wait(int fd, bool for_read, bool for_write, long timeout_ms) noexcept
{
    if (allowed_ > 0) {
        --allowed_;
        return poll_.wait(fd, for_read, for_write, timeout_ms);
    }
    ++interrupts;
    return WaitResult::Interrupted;
}

long elapsed_ms(std::chrono::steady_clock::time_point since)
{
    return static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count());
}

int free_port()
{
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    sockaddr_in addr;
    std::memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    int port = -1;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
        port = ntohs(addr.sin_port);
    ::close(fd);
    return port;
}

namespace {

constexpr int kStartTries = 5;

// The value after the last `name` in args ("" when absent): redis-server keeps the last one given.
std::string last_arg_value(const std::vector<std::string>& args, std::string_view name)
{
    std::string value;
    for (std::size_t i = 0; i + 1 < args.size(); ++i)
        if (args[i] == name)
            value = args[i + 1];
    return value;
}

// The last `lines` lines of a log, joined by " | " ("" when unreadable).
std::string log_tail(const std::string& path, std::size_t lines)
{
    std::ifstream in(path);
    std::vector<std::string> kept;
    for (std::string line; std::getline(in, line);) {
        kept.push_back(line);
        if (kept.size() > lines)
            kept.erase(kept.begin());
    }
    std::string out;
    for (const std::string& line : kept)
        out += (out.empty() ? "" : " | ") + line;
    return out;
}

// A field of an INFO reply ("" when absent).
std::string info_field(const std::string& info, std::string_view field)
{
    std::string key = "\n" + std::string(field) + ":";
    std::string text = "\n" + info;
    std::size_t at = text.find(key);
    if (at == std::string::npos)
        return {};
    at += key.size();
    std::size_t end = text.find_first_of("\r\n", at);
    return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// INFO server from endpoint (AUTH with its password): true with the reply text, or false with why.
bool info_server(const redis::RedisEndpoint& endpoint, std::string* info, std::string* why)
{
    redis::RedisConnection conn;
    PollWaiter waiter;
    redis::RedisStatus st = conn.connect(endpoint, 2000, waiter);
    if (!st.ok()) {
        *why = "connect: " + st.message;
        return false;
    }
    redis::CommandPipeline pipeline;
    pipeline.add({"INFO", "server"});
    std::vector<redis::RedisReply> replies;
    st = conn.execute(pipeline, &replies, 2000, waiter);
    if (!st.ok() || replies.size() != 1) {
        *why = "INFO server: " + st.message;
        return false;
    }
    if (replies[0].is_error()) {
        *why = "INFO server: " + replies[0].str;
        return false;
    }
    *info = replies[0].str;
    return true;
}

}  // namespace

bool RedisServer::start(const std::vector<std::string>& extra_args)
{
    for (int attempt = 1; attempt <= kStartTries; ++attempt) {
        Launch launched = launch(extra_args);
        if (launched == Launch::Started) {
            error_.clear();
            return true;
        }
        stop();
        if (launched == Launch::Failed)
            break;
        if (attempt < kStartTries)
            std::fprintf(stderr, "[test_support] %s: starting redis-server again on another port\n", error_.c_str());
        else
            error_ += " (" + std::to_string(kStartTries) + " tries, each on another port)";
    }
    ADD_FAILURE() << "redis-server did not start: " << error_;
    return false;
}

RedisServer::Launch RedisServer::launch(const std::vector<std::string>& extra_args)
{
    stop();
    char tmpl[] = "/tmp/jobbuf-unit-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
        error_ = std::string("mkdtemp: ") + std::strerror(errno);
        return Launch::Failed;
    }
    dir_ = tmpl;
    socket_path_ = dir_ + "/redis.sock";
    port_ = free_port();
    if (port_ <= 0) {
        error_ = "no free loopback port";
        return Launch::Failed;
    }

    const char* binary = getenv("REDIS_SERVER");
    std::string server = binary != nullptr && *binary != '\0' ? binary : "/usr/bin/redis-server";
    const std::string log_path = dir_ + "/redis.log";
    std::vector<std::string> args = {server,
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--unixsocket",
                                     socket_path_,
                                     "--unixsocketperm",
                                     "700",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--dir",
                                     dir_,
                                     "--daemonize",
                                     "no",
                                     "--logfile",
                                     log_path};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    // The plain TCP port the server listens on (a test may pass "--port 0": TLS only, nothing to check
    // here), and the password the unix socket and that port then ask for.
    const int tcp_port = std::atoi(last_arg_value(args, "--port").c_str());
    const std::string password = last_arg_value(args, "--requirepass");
    std::vector<char*> argv;
    for (std::string& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);

    pid_ = fork();
    if (pid_ < 0) {
        error_ = std::string("fork: ") + std::strerror(errno);
        return Launch::Failed;
    }
    if (pid_ == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int null_fd = open("/dev/null", O_RDWR);
        if (null_fd >= 0) {
            dup2(null_fd, 0);
            dup2(null_fd, 1);
        }
        execv(argv[0], argv.data());
        _exit(127);
    }

    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            std::string log = log_tail(log_path, 2);
            error_ = server + " on port " + std::to_string(port_) + " exited: " + log;
            // Its port was taken between free_port() and its bind (strerror(EADDRINUSE)).
            return log.find("Address already in use") != std::string::npos ? Launch::PortTaken : Launch::Failed;
        }
        struct stat st;
        if (::stat(socket_path_.c_str(), &st) == 0) {
            redis::RedisConnection conn;
            redis::RedisEndpoint ep;  // the unix socket: it answers in plain text even when TCP is TLS only
            ep.kind = redis::RedisEndpoint::Kind::Unix;
            ep.socket_path = socket_path_;
            PollWaiter waiter;
            if (conn.connect(ep, 1000, waiter).ok()) {
                redis::CommandPipeline ping;
                ping.add({"PING"});
                std::vector<redis::RedisReply> replies;
                if (conn.execute(ping, &replies, 1000, waiter).ok())  // PONG or NOAUTH
                    return tcp_port > 0 ? check_tcp_identity(tcp_port, password) : Launch::Started;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    error_ = server + " (pid " + std::to_string(pid_) + ") did not answer on " + socket_path_ +
             " within 10 s: " + log_tail(log_path, 3);
    return Launch::Failed;
}

RedisServer::Launch RedisServer::check_tcp_identity(int tcp_port, const std::string& password)
{
    const std::string where = "127.0.0.1:" + std::to_string(tcp_port);
    // The unix socket lives in our private directory: whoever answers there is the child.
    redis::RedisEndpoint unix_ep;
    unix_ep.kind = redis::RedisEndpoint::Kind::Unix;
    unix_ep.socket_path = socket_path_;
    unix_ep.password = password;
    std::string ours, why;
    if (!info_server(unix_ep, &ours, &why)) {
        error_ = "redis-server (pid " + std::to_string(pid_) + ") on " + socket_path_ + ": " + why;
        return Launch::Failed;
    }
    const std::string run_id = info_field(ours, "run_id");
    if (info_field(ours, "process_id") != std::to_string(pid_) || run_id.empty()) {
        error_ = socket_path_ + " answers as process_id " + info_field(ours, "process_id") + ", not as the child pid " +
                 std::to_string(pid_);
        return Launch::Failed;
    }
    // The port the tests connect to must reach the same process: not another run's server that took
    // the port meanwhile.
    redis::RedisEndpoint tcp_ep;
    tcp_ep.host = "127.0.0.1";
    tcp_ep.port = tcp_port;
    tcp_ep.password = password;
    std::string theirs;
    if (!info_server(tcp_ep, &theirs, &why)) {
        error_ = where + " did not answer as redis-server pid " + std::to_string(pid_) + ": " + why;
        return Launch::PortTaken;
    }
    if (info_field(theirs, "run_id") != run_id || info_field(theirs, "process_id") != std::to_string(pid_)) {
        error_ = where + " is another server (process_id " + info_field(theirs, "process_id") + ", run_id " +
                 info_field(theirs, "run_id") + "), not the redis-server started (pid " + std::to_string(pid_) +
                 ", run_id " + run_id + ")";
        return Launch::PortTaken;
    }
    return Launch::Started;
}

void RedisServer::stop()
{
    if (pid_ > 0) {
        ::kill(pid_, SIGCONT);
        ::kill(pid_, SIGKILL);
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
    }
    if (!dir_.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        dir_.clear();
    }
}

std::string RedisServer::url(std::string_view credentials, int db) const
{
    std::string out = "redis://";
    out.append(credentials);
    out += "127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
    return out;
}

redis::RedisStatus connect_url(redis::RedisConnection& conn, const std::string& url, long timeout_ms)
{
    redis::RedisEndpoint ep;
    std::string error;
    if (!redis::parse_redis_url(url.c_str(), &ep, &error)) {
        ADD_FAILURE() << "bad test URL: " << error;
        return redis::RedisStatus::failure(redis::RedisStatus::Code::ConnectFailed, error);
    }
    PollWaiter waiter;
    return conn.connect(ep, timeout_ms, waiter);
}

redis::RedisReply command(redis::RedisConnection& conn, std::initializer_list<std::string_view> args)
{
    redis::CommandPipeline pipeline;
    pipeline.add(args);
    std::vector<redis::RedisReply> replies;
    PollWaiter waiter;
    redis::RedisStatus st = conn.execute(pipeline, &replies, 5000, waiter);
    if (!st.ok() || replies.size() != 1) {
        ADD_FAILURE() << "command failed: " << st.message;
        return redis::RedisReply();
    }
    return replies[0];
}

bool deliver_batch(redis::RedisConnection& conn, const redis::QueueTarget& target,
                   const std::vector<redis::StagedJob>& jobs, std::vector<redis::JobOutcome>* outcomes,
                   std::string* error, double now, std::string_view marker_key)
{
    redis::DeliveryPlan plan;
    EXPECT_TRUE(redis::plan_delivery(target, jobs, marker_key, now, &plan, error)) << *error;
    std::vector<redis::RedisReply> replies;
    PollWaiter waiter;
    redis::RedisStatus st = conn.execute(plan.unit, &replies, 5000, waiter);
    EXPECT_TRUE(st.ok()) << st.message;
    return redis::read_delivery(plan, replies, jobs.size(), outcomes, error);
}

void expect_first_delivered_rest_rejected(const std::vector<redis::JobOutcome>& outcomes, std::string_view error_part)
{
    ASSERT_FALSE(outcomes.empty());
    EXPECT_EQ(outcomes[0].result, redis::JobResult::Delivered) << outcomes[0].error;
    for (std::size_t i = 1; i < outcomes.size(); ++i) {
        EXPECT_EQ(outcomes[i].result, redis::JobResult::Rejected) << i;
        EXPECT_NE(outcomes[i].error.find(error_part), std::string::npos) << outcomes[i].error;
    }
}

void RedisServerTest::SetUp()
{
    ASSERT_TRUE(server_.start());
    redis::RedisStatus st = connect_url(conn_, server_.url());
    ASSERT_TRUE(st.ok()) << st.message;
}

std::vector<redis::StagedJob> RedisServerTest::jobs_from(const std::vector<std::string>& payloads,
                                                         std::int64_t first_id, std::uint32_t id_salt) const
{
    const double staged_at = now_ - 100;
    std::vector<redis::StagedJob> jobs(payloads.size());
    for (std::size_t i = 0; i < payloads.size(); ++i) {
        jobs[i].id = first_id + static_cast<std::int64_t>(i);
        jobs[i].id_salt = id_salt;
        jobs[i].payload = payloads[i];
        jobs[i].staged_at = staged_at;
        jobs[i].run_at = staged_at;
    }
    return jobs;
}

std::vector<redis::JobOutcome> RedisServerTest::deliver(const redis::QueueTarget& target,
                                                        const std::vector<redis::StagedJob>& jobs)
{
    std::vector<redis::JobOutcome> out;
    std::string error;
    EXPECT_TRUE(deliver_batch(conn_, target, jobs, &out, &error, now_)) << error;
    return out;
}

std::unique_ptr<jobbuf::redis::QueueTarget>
make_target(std::string_view name, std::initializer_list<std::pair<const char*, const char*>> options,
            std::string_view queue)
{
    std::vector<jobbuf::redis::TargetOption> list;
    for (const auto& option : options)
        list.push_back({option.first, option.second});
    jobbuf::redis::TargetSetup setup{queue, list.data(), list.size()};
    std::string error;
    auto target = jobbuf::redis::make_queue_target(name, setup, &error);
    if (!target)
        throw std::runtime_error(error);
    return target;
}

}  // namespace jobbuf::test
