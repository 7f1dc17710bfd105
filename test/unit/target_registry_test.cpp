// Unit tests of the target registry: targets made by name from option text, their defaults, their
// traits, and the group messages they write (which must read as jsonb prints them).
#include <gtest/gtest.h>

#include <string>

#include "redis/delivery.h"
#include "redis/target_handle.h"
#include "redis/targets/target_registry.h"
#include "test_support.h"

using namespace jobbuf::redis;
using namespace jobbuf::test;

namespace {

std::string first_push_key(const QueueTarget& target)
{
    StagedJob job;
    job.id = 1;
    job.payload = "{}";
    DeliveryPlan plan;
    std::string error;
    EXPECT_TRUE(plan_delivery(target, {job}, "m", 0, &plan, &error)) << error;
    const auto pieces = plan.unit.pieces();
    std::string wire;
    for (auto piece : pieces)
        wire.append(piece.data(), piece.size());
    // MULTI, then the first push: *N $len CMD $len KEY
    std::size_t push = wire.find("*", wire.find("MULTI"));
    std::size_t key_len = wire.find("$", wire.find("\r\n", wire.find("$", wire.find("\r\n", push) + 2) + 2) + 2);
    std::size_t key_start = wire.find("\r\n", key_len) + 2;
    return wire.substr(key_start, wire.find("\r\n", key_start) - key_start);
}

}  // namespace

TEST(TargetRegistry, KnowsEveryTargetByName)
{
    EXPECT_EQ(make_target("list")->kind(), TargetKind::List);
    EXPECT_EQ(make_target("stream")->kind(), TargetKind::Stream);
    EXPECT_EQ(make_target("sidekiq")->kind(), TargetKind::Sidekiq);
    std::string error;
    TargetSetup setup{"q", nullptr, 0};
    EXPECT_EQ(make_queue_target("none", setup, &error), nullptr);
    EXPECT_NE(error.find("unknown target \"none\""), std::string::npos) << error;
}

TEST(TargetRegistry, KeysDefaultToTheQueueName)
{
    EXPECT_EQ(first_push_key(*make_target("list", {}, "mail")), "jobbuf:mail");
    EXPECT_EQ(first_push_key(*make_target("list", {{"key", "custom"}}, "mail")), "custom");
    EXPECT_EQ(first_push_key(*make_target("stream", {}, "events")), "jobbuf:events");
    EXPECT_EQ(first_push_key(*make_target("sidekiq", {}, "mail")), "queues");
    EXPECT_EQ(first_push_key(*make_target("sidekiq", {{"namespace", "app"}}, "mail")), "app:queues");
}

TEST(TargetRegistry, UnreadableOptionsAreRefusedWithTheirName)
{
    std::string error;
    TargetOption bad[] = {{"sidekiq_version", "seven"}};
    TargetSetup setup{"q", bad, 1};
    EXPECT_EQ(make_queue_target("sidekiq", setup, &error), nullptr);
    EXPECT_NE(error.find("sidekiq_version"), std::string::npos) << error;
    TargetOption negative[] = {{"maxlen", "-1"}};
    TargetSetup stream{"q", negative, 1};
    EXPECT_EQ(make_queue_target("stream", stream, &error), nullptr);
    EXPECT_NE(error.find("maxlen"), std::string::npos) << error;
}

TEST(TargetRegistry, OnlySidekiqCarriesRunAtAndOwnsPayloadKeys)
{
    const TargetTraits& sidekiq = make_target("sidekiq")->traits();
    EXPECT_TRUE(sidekiq.carries_run_at);
    ASSERT_EQ(sidekiq.own_key_count, 4u);
    EXPECT_STREQ(sidekiq.own_keys[0], "queue");
    EXPECT_STREQ(sidekiq.probed_key, "retry");
    for (const char* name : {"list", "stream"}) {
        const TargetTraits& traits = make_target(name)->traits();
        EXPECT_FALSE(traits.carries_run_at) << name;
        EXPECT_EQ(traits.own_key_count, 0u) << name;
        EXPECT_EQ(traits.probed_key, nullptr) << name;
    }
}

TEST(TargetRegistry, GroupMessagesReadAsJsonbPrintsThem)
{
    const std::int64_t ids[] = {3, 4, 10};
    const char* group = "0b9c4c4e-1f0e-4d6a-9a55-5d2f1d5e8a10";
    std::string list;
    make_target("list")->append_group_payload(group, ids, 3, &list);
    EXPECT_EQ(list, std::string("{\"ids\": [3, 4, 10], \"group_id\": \"") + group + "\"}");
    std::string sidekiq;
    make_target("sidekiq", {{"group_class", "Mail::BatchJob"}})->append_group_payload(group, ids, 3, &sidekiq);
    EXPECT_EQ(sidekiq, std::string("{\"args\": [\"") + group + "\"], \"class\": \"Mail::BatchJob\"}");
}

TEST(TargetHandle, GroupPayloadReportsTheLengthItNeeds)
{
    char error[128];
    TargetOption options[] = {{"key", "k"}};
    QueueTarget* target = queue_target_create("list", "q", options, 1, error, sizeof error);
    ASSERT_NE(target, nullptr) << error;
    const std::int64_t ids[] = {1};
    char small[4];
    std::size_t needed = queue_target_group_payload(target, "g", ids, 1, small, sizeof small);
    EXPECT_EQ(std::string(small), "{\"i");
    std::string big(needed + 1, '\0');
    EXPECT_EQ(queue_target_group_payload(target, "g", ids, 1, big.data(), big.size()), needed);
    EXPECT_EQ(std::string(big.c_str()), "{\"ids\": [1], \"group_id\": \"g\"}");
    queue_target_destroy(target);
    EXPECT_EQ(queue_target_create("nope", "q", nullptr, 0, error, sizeof error), nullptr);
    EXPECT_NE(std::string(error).find("unknown target"), std::string::npos);
}
