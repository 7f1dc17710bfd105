// Redis Cluster slot hashing (CRC16, hash tags, empty tags) and each slot's marker tag, checked
// against what a real cluster-enabled redis-server computes (CLUSTER KEYSLOT); the slot map read
// from its CLUSTER SHARDS and CLUSTER SLOTS; redirections; the redis+cluster:// URL.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "redis/cluster/slot_hash.h"
#include "redis/cluster/slot_map.h"
#include "redis/endpoint.h"
#include "test_support.h"

namespace jobbuf::test {
namespace {

using redis::RedisReply;

class ClusterNodeTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        // The cluster bus port is given: port + 10000 may be taken, or past 65535.
        ASSERT_TRUE(server_.start({"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port",
                                   std::to_string(free_port())}));
        ASSERT_TRUE(connect_url(conn_, server_.url()).ok());
    }

    // CLUSTER KEYSLOT of every key, in one round trip.
    std::vector<long long> server_slots(const std::vector<std::string>& keys)
    {
        redis::CommandPipeline pipeline;
        for (const std::string& key : keys)
            pipeline.add({"CLUSTER", "KEYSLOT", key});
        std::vector<RedisReply> replies;
        PollWaiter waiter;
        EXPECT_TRUE(conn_.execute(pipeline, &replies, 10000, waiter).ok());
        std::vector<long long> slots;
        for (const RedisReply& reply : replies)
            slots.push_back(reply.type == RedisReply::Type::Integer ? reply.integer : -1);
        return slots;
    }

    RedisServer server_;
    redis::RedisConnection conn_;
};

TEST_F(ClusterNodeTest, KeySlotIsWhatTheServerComputes)
{
    std::vector<std::string> keys = {"",
                                     "a",
                                     "jobbuf:mail",
                                     "123456789",
                                     "{user1000}.following",
                                     "{user1000}.followers",
                                     "foo{}{bar}",     // an empty first tag: the whole key is hashed
                                     "foo{{bar}}zap",  // the tag is "{bar"
                                     "foo{bar}{zap}",  // only the first tag counts
                                     "{",
                                     "}",
                                     "{}",
                                     "a{b",
                                     "a}b{c}",
                                     "{}x",
                                     "x{}",
                                     "bull:{q}:wait",
                                     "{bull}:q:wait",
                                     std::string("\xff\x00\x80{\x01}", 7),
                                     "jobbuf:marker:7349812374:16384:16385{0}"};
    std::mt19937 random(24);
    const std::string alphabet = "ab{}:0123456789xyz";
    for (int i = 0; i < 2000; ++i) {
        std::string key;
        int length = static_cast<int>(random() % 12);
        for (int k = 0; k < length; ++k)
            key += alphabet[random() % alphabet.size()];
        keys.push_back(key);
    }
    std::vector<long long> expected = server_slots(keys);
    ASSERT_EQ(expected.size(), keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i)
        EXPECT_EQ(redis::key_slot(keys[i]), expected[i]) << "key \"" << keys[i] << "\"";
}

TEST_F(ClusterNodeTest, SlotTagsLandInTheirSlot)
{
    std::vector<int> slots;
    for (int slot = 0; slot < redis::kClusterSlots; slot += 61)
        slots.push_back(slot);
    slots.push_back(redis::kClusterSlots - 1);
    std::vector<std::string> keys;
    for (int slot : slots) {
        std::string tag = redis::slot_tag(slot);
        ASSERT_FALSE(tag.empty());
        EXPECT_LE(tag.size(), 4u);
        keys.push_back("jobbuf:marker:1:2:3{" + tag + "}");
    }
    std::vector<long long> expected = server_slots(keys);
    for (std::size_t i = 0; i < slots.size(); ++i)
        EXPECT_EQ(expected[i], slots[i]) << keys[i];
    EXPECT_EQ(redis::slot_tag(12539), redis::slot_tag(12539));  // the same marker after a restart
}

TEST_F(ClusterNodeTest, SlotMapFromShardsAndSlots)
{
    RedisReply added = command(conn_, {"CLUSTER", "ADDSLOTSRANGE", "0", "16383"});
    ASSERT_FALSE(added.is_error()) << added.str;
    RedisReply id = command(conn_, {"CLUSTER", "MYID"});
    for (const char* how : {"SHARDS", "SLOTS"}) {
        RedisReply reply = command(conn_, {"CLUSTER", how});
        redis::SlotMap map;
        std::string error;
        bool parsed = std::string(how) == "SHARDS" ? redis::parse_cluster_shards(reply, false, &map, &error)
                                                   : redis::parse_cluster_slots(reply, &map, &error);
        ASSERT_TRUE(parsed) << how << ": " << error;
        ASSERT_EQ(map.nodes.size(), 1u) << how;
        EXPECT_TRUE(map.nodes[0].master);
        EXPECT_EQ(map.nodes[0].at.port, server_.port());
        EXPECT_EQ(map.nodes[0].id, id.str);
        ASSERT_TRUE(map.known());
        EXPECT_EQ(map.owner[0], 0);
        EXPECT_EQ(map.owner[16383], 0);
    }
}

TEST(ClusterRedirect, MovedAskTryAgainClusterDown)
{
    RedisReply moved;
    moved.type = RedisReply::Type::Error;
    moved.str = "MOVED 3999 127.0.0.1:6381";
    redis::Redirect r = redis::redirect_of(moved);
    EXPECT_EQ(r.kind, redis::Redirect::Kind::Moved);
    EXPECT_EQ(r.slot, 3999);
    EXPECT_EQ(r.at.host, "127.0.0.1");
    EXPECT_EQ(r.at.port, 6381);
    moved.str = "ASK 12 :7000";  // no preferred endpoint: the node that answered
    r = redis::redirect_of(moved);
    EXPECT_EQ(r.kind, redis::Redirect::Kind::Ask);
    EXPECT_EQ(r.at.host, "");
    EXPECT_EQ(r.at.port, 7000);
    moved.str = "TRYAGAIN Multiple keys request during rehashing of slot";
    EXPECT_EQ(redis::redirect_of(moved).kind, redis::Redirect::Kind::TryAgain);
    moved.str = "CLUSTERDOWN The cluster is down";
    EXPECT_EQ(redis::redirect_of(moved).kind, redis::Redirect::Kind::ClusterDown);
    moved.str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    EXPECT_EQ(redis::redirect_of(moved).kind, redis::Redirect::Kind::None);
    moved.str = "MOVED 99999 127.0.0.1:1";  // not a slot
    EXPECT_EQ(redis::redirect_of(moved).kind, redis::Redirect::Kind::None);
}

TEST(ClusterUrl, SeedsAndDatabase)
{
    redis::RedisEndpoint ep;
    std::string error;
    ASSERT_TRUE(redis::parse_redis_url("redis+cluster://u:secret@10.0.0.1:7000,10.0.0.2,[::1]:7002", &ep, &error))
        << error;
    EXPECT_EQ(ep.kind, redis::RedisEndpoint::Kind::Cluster);
    ASSERT_EQ(ep.seeds.size(), 3u);
    EXPECT_EQ(ep.seeds[1].port, 6379);
    EXPECT_EQ(ep.seeds[2].host, "::1");
    EXPECT_EQ(ep.password, "secret");
    EXPECT_EQ(ep.redacted(), "redis+cluster://u:***@10.0.0.1:7000,10.0.0.2:6379,[::1]:7002/0");
    ASSERT_TRUE(redis::parse_redis_url("rediss+cluster://h:7000/0", &ep, &error)) << error;
    EXPECT_TRUE(ep.tls);
    EXPECT_FALSE(redis::parse_redis_url("redis+cluster://h:7000/1", &ep, &error));
    EXPECT_NE(error.find("only database 0"), std::string::npos) << error;
}

}  // namespace
}  // namespace jobbuf::test
