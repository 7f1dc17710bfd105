// Tests that RedisConnection's round-trip timeout bounds each wait for progress, not the whole
// round trip: a large transfer through a slow link outlives the timeout, a peer that stops
// moving bytes in either direction still times out, and connect keeps one bound for the call.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "test_support.h"
#include "throttled_relay.h"

using namespace jobbuf::redis;
using namespace jobbuf::test;
using Code = RedisStatus::Code;
using std::chrono::milliseconds;

namespace {

constexpr long kTimeoutMs = 300;
constexpr std::size_t kValueBytes = 8 * 1024 * 1024;
// 64kB every 4 ms: each direction of an 8MB value needs at least 128 pauses, over 500 ms, while
// no wait for progress comes near 300 ms.
constexpr ThrottledRelay::Pace kSlowLink{64 * 1024, milliseconds(4)};

class ConnectionProgressTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_TRUE(server_.start());
        value_.resize(kValueBytes);
        for (std::size_t i = 0; i < value_.size(); ++i)
            value_[i] = static_cast<char>('a' + (i * 31) % 26);
    }

    std::string relay_url(const ThrottledRelay& relay) const
    {
        return "redis://127.0.0.1:" + std::to_string(relay.port());
    }

    RedisServer server_;
    PollWaiter waiter_;
    std::string value_;
};

}  // namespace

TEST_F(ConnectionProgressTest, LargeTransferThatKeepsMovingOutlivesTheTimeout)
{
    ThrottledRelay relay(server_.port(), kSlowLink);
    ASSERT_TRUE(relay.start());
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, relay_url(relay)).ok());
    CommandPipeline b;
    b.add({"SET", "big", value_});
    b.add({"GET", "big"});
    std::vector<RedisReply> r;
    auto start = std::chrono::steady_clock::now();
    RedisStatus st = conn.execute(b, &r, kTimeoutMs, waiter_);
    long took = elapsed_ms(start);
    ASSERT_TRUE(st.ok()) << st.message << " (after " << took << " ms)";
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].str, "OK");
    EXPECT_TRUE(r[1].str == value_);
    // The relay's pauses alone make the round trip last several timeouts: the precondition the
    // test is about, built by the relay rather than hoped for.
    EXPECT_GT(took, 3 * kTimeoutMs);
    EXPECT_TRUE(conn.connected());
}

TEST_F(ConnectionProgressTest, PeerThatStopsReadingTimesOut)
{
    ThrottledRelay relay(server_.port(), kSlowLink);
    ASSERT_TRUE(relay.start());
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, relay_url(relay)).ok());
    relay.stall_to_server_after(1024 * 1024);
    CommandPipeline b;
    b.add({"SET", "big", value_});
    std::vector<RedisReply> r;
    auto start = std::chrono::steady_clock::now();
    RedisStatus st = conn.execute(b, &r, kTimeoutMs, waiter_);
    long took = elapsed_ms(start);
    EXPECT_EQ(st.code, Code::Timeout) << st.message;
    EXPECT_NE(st.message.find("without progress while sending to Redis"), std::string::npos) << st.message;
    EXPECT_LT(took, 5000);
    EXPECT_FALSE(conn.connected());
}

TEST_F(ConnectionProgressTest, PeerThatStopsReplyingTimesOut)
{
    RedisConnection direct;
    ASSERT_TRUE(connect_url(direct, server_.url()).ok());
    ASSERT_EQ(command(direct, {"SET", "big", value_}).str, "OK");

    ThrottledRelay relay(server_.port(), kSlowLink);
    ASSERT_TRUE(relay.start());
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, relay_url(relay)).ok());
    relay.stall_to_client_after(1024 * 1024);
    CommandPipeline b;
    b.add({"GET", "big"});
    std::vector<RedisReply> r;
    auto start = std::chrono::steady_clock::now();
    RedisStatus st = conn.execute(b, &r, kTimeoutMs, waiter_);
    long took = elapsed_ms(start);
    EXPECT_EQ(st.code, Code::Timeout) << st.message;
    EXPECT_NE(st.message.find("without progress while waiting for Redis to reply"), std::string::npos) << st.message;
    EXPECT_LT(took, 5000);
    EXPECT_FALSE(conn.connected());
}

TEST_F(ConnectionProgressTest, ConnectKeepsOneBoundForTheWholeCall)
{
    // One byte every 50 ms: the AUTH request keeps moving, but needs far longer than the
    // connect timeout to get through.
    ThrottledRelay relay(server_.port(), {1, milliseconds(50)});
    ASSERT_TRUE(relay.start());
    RedisConnection conn;
    std::string password(200, 'p');
    auto start = std::chrono::steady_clock::now();
    RedisStatus st =
        connect_url(conn, "redis://:" + password + "@127.0.0.1:" + std::to_string(relay.port()), kTimeoutMs);
    long took = elapsed_ms(start);
    EXPECT_EQ(st.code, Code::Timeout) << st.message;
    EXPECT_EQ(st.message.find("without progress"), std::string::npos) << st.message;
    EXPECT_LT(took, 5000);
    EXPECT_FALSE(conn.connected());
}
