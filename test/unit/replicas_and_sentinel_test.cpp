// Tests of DrainSession with jobbuf.redis_min_replicas (WAIT after each unit, markers confirmed
// on replicas) against a real master and replica, and of the Sentinel locator's failures.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "redis/drain_session.h"
#include "redis/free_with.h"
#include "redis/net/sentinel_locator.h"
#include "test_support.h"

using namespace jobbuf::redis;
using namespace jobbuf::test;

namespace {

class MinReplicasTest : public ::testing::Test {
protected:
    // timeout_ms bounds how long WAIT waits for replicas: short where no replica can answer, long
    // where one must (a loaded machine may take a while to acknowledge).
    void configure(int min_replicas, long timeout_ms = 300)
    {
        std::string url = master_.url();
        SessionSettings settings;
        settings.redis_url = url.c_str();
        settings.timeout_ms = timeout_ms;
        settings.client_name = "jobbuf-unit-min-replicas";
        settings.min_replicas = min_replicas;
        ASSERT_EQ(drain_session_configure(session_.get(), settings).status, SessionReport::Status::Ok);
        drain_session_set_marker_key(session_.get(), "jobbuf:unit:marker");
        bool fresh = false;
        SessionReport report = drain_session_connect(session_.get(), waiter_, &fresh);
        ASSERT_EQ(report.status, SessionReport::Status::Ok) << report.message;
    }

    SessionReport deliver(std::int64_t first_id, std::size_t count)
    {
        payloads_.clear();
        for (std::size_t i = 0; i < count; ++i)
            payloads_.push_back("{\"n\":" + std::to_string(first_id + i) + "}");
        std::vector<StagedJob> jobs(count);
        for (std::size_t i = 0; i < count; ++i) {
            jobs[i].id = first_id + static_cast<std::int64_t>(i);
            jobs[i].payload = payloads_[i];
        }
        auto target = jobbuf::test::make_target("list", {{"key", "jobbuf:unit:list"}});
        std::vector<JobResult> results(count);
        char reject[kMessageLen];
        return drain_session_deliver(session_.get(), waiter_, target.get(), jobs.data(), count, 0, results.data(),
                                     reject, sizeof reject);
    }

    // The marker as reconciliation reads it (count of ids), or -1 when the read is not Ok.
    long marker_count()
    {
        const MarkerView* markers = nullptr;
        std::size_t n = 0;
        SessionReport report = drain_session_read_marker(session_.get(), waiter_, &markers, &n);
        last_message_ = report.message;
        std::size_t ids = 0;
        for (std::size_t i = 0; i < n; ++i)
            ids += markers[i].count;
        return report.status == SessionReport::Status::Ok ? static_cast<long>(ids) : -1;
    }

    bool start_replica()
    {
        if (!replica_.start({"--replicaof", "127.0.0.1", std::to_string(master_.port())}))
            return false;
        RedisConnection conn;
        if (!connect_url(conn, replica_.url()).ok())
            return false;
        for (int i = 0; i < 500; ++i) {
            if (command(conn, {"INFO", "replication"}).str.find("master_link_status:up") != std::string::npos)
                return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    }

    RedisServer master_, replica_;
    PollWaiter waiter_;
    std::unique_ptr<DrainSession, FreeWith<drain_session_destroy>> session_{drain_session_create()};
    std::vector<std::string> payloads_;
    std::string last_message_;
};

TEST_F(MinReplicasTest, UnacknowledgedUnitIsNotDeliveredAndItsMarkerNotTrusted)
{
    ASSERT_TRUE(master_.start({"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}));
    configure(1);
    // No replica: the unit reaches the master, but is reported undelivered (jobs stay staged).
    SessionReport report = deliver(1, 3);
    EXPECT_EQ(report.status, SessionReport::Status::Unavailable);
    EXPECT_NE(std::string(report.message).find("0 of jobbuf.redis_min_replicas = 1"), std::string::npos)
        << report.message;
    EXPECT_TRUE(drain_session_connected(session_.get())) << "a missing acknowledgement is not a broken connection";
    // Reconciliation does not trust the marker (it names jobs no replica has) ...
    EXPECT_EQ(marker_count(), -1);
    EXPECT_NE(last_message_.find("confirming the delivery marker"), std::string::npos) << last_message_;
    // ... until a replica has it.
    ASSERT_TRUE(start_replica());
    configure(1, 10000);
    EXPECT_EQ(marker_count(), 3) << last_message_;
    report = deliver(4, 2);
    EXPECT_EQ(report.status, SessionReport::Status::Ok) << report.message;
}

TEST_F(MinReplicasTest, ZeroSendsNoWait)
{
    ASSERT_TRUE(master_.start());
    configure(0);
    EXPECT_EQ(deliver(1, 2).status, SessionReport::Status::Ok);
    EXPECT_EQ(marker_count(), 2);
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, master_.url()).ok());
    EXPECT_EQ(command(conn, {"INFO", "commandstats"}).str.find("cmdstat_wait"), std::string::npos);
}

TEST_F(MinReplicasTest, ReadonlyReplyDropsTheConnection)
{
    ASSERT_TRUE(master_.start());
    configure(0);
    RedisConnection admin;
    ASSERT_TRUE(connect_url(admin, master_.url()).ok());
    RedisServer other;
    ASSERT_TRUE(other.start());
    command(admin, {"REPLICAOF", "127.0.0.1", std::to_string(other.port())});  // demoted, as by a failover
    SessionReport report = deliver(1, 1);
    EXPECT_EQ(report.status, SessionReport::Status::Refused) << report.message;  // EXECABORT: nothing ran
    EXPECT_NE(std::string(report.message).find("READONLY"), std::string::npos) << report.message;
    EXPECT_FALSE(drain_session_connected(session_.get())) << "a READONLY server was kept";
}

TEST(SentinelLocator, AllSentinelsDownNamesEach)
{
    RedisEndpoint ep;
    std::string error;
    int a = free_port(), b = free_port();
    std::string url =
        "redis+sentinel://127.0.0.1:" + std::to_string(a) + ",127.0.0.1:" + std::to_string(b) + "/mymaster";
    ASSERT_TRUE(parse_redis_url(url.c_str(), &ep, &error)) << error;
    RedisConnection conn;
    PollWaiter waiter;
    SentinelCursor cursor;
    RedisStatus st = connect_to_master(conn, ep, "Sentinel-S3cret", 500, waiter, &cursor);
    EXPECT_EQ(st.code, RedisStatus::Code::ConnectFailed);
    EXPECT_NE(st.message.find("no reachable master \"mymaster\""), std::string::npos) << st.message;
    EXPECT_NE(st.message.find("sentinel 127.0.0.1:" + std::to_string(a)), std::string::npos) << st.message;
    EXPECT_NE(st.message.find("sentinel 127.0.0.1:" + std::to_string(b)), std::string::npos) << st.message;
    EXPECT_EQ(st.message.find("S3cret"), std::string::npos);
    EXPECT_FALSE(conn.connected());
}

TEST(SentinelLocator, ServerThatIsNoSentinelIsReported)
{
    RedisServer plain;
    ASSERT_TRUE(plain.start());
    RedisEndpoint ep;
    std::string error;
    std::string url = "redis+sentinel://127.0.0.1:" + std::to_string(plain.port()) + "/mymaster";
    ASSERT_TRUE(parse_redis_url(url.c_str(), &ep, &error)) << error;
    RedisConnection conn;
    PollWaiter waiter;
    SentinelCursor cursor;
    RedisStatus st = connect_to_master(conn, ep, "", 500, waiter, &cursor);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message.find("unknown command"), std::string::npos) << st.message;
}

}  // namespace
