// The `bullmq` target against a private redis-server: what one batch writes (job hashes, wait
// list, delayed set, marker, events), duplicates, refused payloads and key types, group
// messages. That the keys are exactly what BullMQ's Queue.add writes is checked against BullMQ
// itself by test/consumers/node/bullmq_format_check.js compare (the end-to-end tests run it).
#include <gtest/gtest.h>

#include "redis/delivery.h"
#include "test_support.h"

using namespace jobbuf::redis;
using namespace jobbuf::test;

namespace {

constexpr double kNow = 1700000100.0;

class BullmqTargetTest : public RedisServerTest {
protected:
    BullmqTargetTest() : RedisServerTest(kNow) {}

    std::string hget(const std::string& key, const char* field) { return command(conn_, {"HGET", key, field}).str; }

    std::vector<std::string> strings(RedisReply reply)
    {
        std::vector<std::string> out;
        for (const auto& e : reply.elements)
            out.push_back(e.str);
        return out;
    }
};

}  // namespace

TEST_F(BullmqTargetTest, ImmediateJobsAreWaitingInIdOrder)
{
    auto t = jobbuf::test::make_target("bullmq", {}, "mail");
    std::vector<std::string> payloads = {R"({"data": {"user": 1}, "name": "welcome"})",
                                         R"({"data": [1, "two"], "name": "caf\u00e9 \"x\""})"};
    auto out = deliver(*t, jobs_from(payloads, 41, 0xabcd));
    ASSERT_EQ(out.size(), 2u);
    for (const auto& o : out)
        EXPECT_EQ(o.result, JobResult::Delivered) << o.error;

    // LPUSH: workers take from the right, so the first job is last in LRANGE order.
    EXPECT_EQ(strings(command(conn_, {"LRANGE", "bull:mail:wait", "0", "-1"})),
              (std::vector<std::string>{"jb-0000abcd-42", "jb-0000abcd-41"}));
    EXPECT_EQ(hget("bull:mail:jb-0000abcd-41", "name"), "welcome");
    EXPECT_EQ(hget("bull:mail:jb-0000abcd-41", "data"), R"({"user": 1})");
    EXPECT_EQ(hget("bull:mail:jb-0000abcd-41", "opts"), R"({"attempts":0,"jobId":"jb-0000abcd-41"})");
    EXPECT_EQ(hget("bull:mail:jb-0000abcd-41", "timestamp"), "1700000000000");
    EXPECT_EQ(hget("bull:mail:jb-0000abcd-41", "delay"), "0");
    EXPECT_EQ(hget("bull:mail:jb-0000abcd-41", "priority"), "0");
    EXPECT_EQ(hget("bull:mail:jb-0000abcd-42", "name"), "caf\xc3\xa9 \"x\"");
    EXPECT_EQ(hget("bull:mail:jb-0000abcd-42", "data"), R"([1, "two"])");
    EXPECT_EQ(command(conn_, {"ZSCORE", "bull:mail:marker", "0"}).str, "0");
    EXPECT_EQ(command(conn_, {"XLEN", "bull:mail:events"}).integer, 4);  // added + waiting, twice
    EXPECT_EQ(command(conn_, {"GET", "bull:mail:id"}).str, "2");
    EXPECT_EQ(command(conn_, {"GET", "jobbuf:marker:test"}).str, "41,42");
}

TEST_F(BullmqTargetTest, LaterRunAtIsADelayedJobDueThen)
{
    auto t = jobbuf::test::make_target("bullmq", {}, "mail");
    std::vector<std::string> payloads = {R"({"data": {}, "name": "later"})"};
    auto jobs = jobs_from(payloads, 7, 1);
    jobs[0].run_at = kNow + 60;  // staged at kNow - 100: due 160 s after its timestamp
    auto out = deliver(*t, jobs);
    ASSERT_EQ(out[0].result, JobResult::Delivered) << out[0].error;
    const std::string key = "bull:mail:jb-00000001-7";
    EXPECT_EQ(hget(key, "delay"), "160000");
    EXPECT_EQ(hget(key, "opts"), R"({"attempts":0,"jobId":"jb-00000001-7","delay":160000})");
    const long long due = 1700000160000LL;
    EXPECT_EQ(command(conn_, {"ZSCORE", "bull:mail:delayed", "jb-00000001-7"}).str, std::to_string(due * 4096));
    EXPECT_EQ(command(conn_, {"ZSCORE", "bull:mail:marker", "1"}).str, std::to_string(due));
    EXPECT_EQ(command(conn_, {"LLEN", "bull:mail:wait"}).integer, 0);
}

TEST_F(BullmqTargetTest, OptionsAreStoredAsQueueAddStoresThem)
{
    auto t = jobbuf::test::make_target("bullmq", {{"prefix", "{app}"}, {"bullmq_queue", "jobs"}}, "mail");
    std::vector<std::string> payloads = {
        R"({"data": null, "name": "vip", "opts": {"backoff": 500, "attempts": 3, "priority": 5, "removeOnFail": {"age": 60}, "removeOnComplete": true}})"};
    auto out = deliver(*t, jobs_from(payloads, 9, 1));
    ASSERT_EQ(out[0].result, JobResult::Delivered) << out[0].error;
    const std::string key = "{app}:jobs:jb-00000001-9";
    EXPECT_EQ(hget(key, "opts"), R"({"attempts":3,"jobId":"jb-00000001-9","priority":5,)"
                                 R"("backoff":{"type":"fixed","delay":500},"removeOnComplete":true,)"
                                 R"("removeOnFail":{"age": 60}})");
    EXPECT_EQ(hget(key, "priority"), "5");
    EXPECT_EQ(hget(key, "data"), "null");
    EXPECT_EQ(command(conn_, {"ZSCORE", "{app}:jobs:prioritized", "jb-00000001-9"}).str,
              std::to_string(5 * 4294967296LL + 1));
    // Every key of the queue shares the "{app}" hash tag: one cluster slot.
    for (const auto& key_name : strings(command(conn_, {"KEYS", "*"})))
        EXPECT_TRUE(key_name == "jobbuf:marker:test" || key_name.rfind("{app}:jobs:", 0) == 0) << key_name;
}

TEST_F(BullmqTargetTest, APushedAgainJobIsOneJob)
{
    auto t = jobbuf::test::make_target("bullmq", {}, "mail");
    std::vector<std::string> first = {R"({"data": 1, "name": "a"})"};
    std::vector<std::string> again = {R"({"data": 2, "name": "changed"})"};
    deliver(*t, jobs_from(first, 5, 1));
    auto out = deliver(*t, jobs_from(again, 5, 1));
    EXPECT_EQ(out[0].result, JobResult::Delivered);
    EXPECT_EQ(command(conn_, {"LLEN", "bull:mail:wait"}).integer, 1);
    EXPECT_EQ(hget("bull:mail:jb-00000001-5", "data"), "1");
    RedisReply last = command(conn_, {"XREVRANGE", "bull:mail:events", "+", "-", "COUNT", "1"});
    ASSERT_EQ(last.elements.size(), 1u);
    EXPECT_EQ(strings(last.elements[0].elements[1]),
              (std::vector<std::string>{"event", "duplicated", "jobId", "jb-00000001-5"}));
}

TEST_F(BullmqTargetTest, AKeyOfAnotherTypeRefusesTheWholeBatchUnwritten)
{
    command(conn_, {"SET", "bull:mail:delayed", "not a zset"});
    auto t = jobbuf::test::make_target("bullmq", {}, "mail");
    std::vector<std::string> payloads = {R"({"data": 1, "name": "a"})", R"({"data": 2, "name": "b"})"};
    auto out = deliver(*t, jobs_from(payloads, 1, 1));
    for (const auto& o : out) {
        EXPECT_EQ(o.result, JobResult::Rejected);
        EXPECT_NE(o.error.find("WRONGTYPE jobbuf"), std::string::npos) << o.error;
    }
    EXPECT_EQ(command(conn_, {"EXISTS", "bull:mail:jb-00000001-1", "bull:mail:wait", "bull:mail:id"}).integer, 0);
}

TEST_F(BullmqTargetTest, APayloadThatIsNotAJobIsRefusedAlone)
{
    auto t = jobbuf::test::make_target("bullmq", {}, "mail");
    std::vector<std::string> payloads = {R"({"data": 1, "name": "a"})", R"({"data": 2})", R"([1])",
                                         R"({"data": 3, "name": "c", "opts": {"priority": 1.5}})"};
    auto out = deliver(*t, jobs_from(payloads, 1, 1));
    ASSERT_EQ(out.size(), 4u);
    expect_first_delivered_rest_rejected(out, "jobbuf: the payload");
    EXPECT_EQ(command(conn_, {"LLEN", "bull:mail:wait"}).integer, 1);
}

TEST_F(BullmqTargetTest, AGroupIsOneJobNamingIt)
{
    auto t = jobbuf::test::make_target("bullmq", {{"group_class", "digest"}}, "mail");
    std::string payload;
    const std::int64_t ids[] = {3, 4};
    t->append_group_payload("0b9e6c1e-0000-4000-8000-000000000001", ids, 2, &payload);
    EXPECT_EQ(payload, R"({"data": {"group_id": "0b9e6c1e-0000-4000-8000-000000000001"}, "name": "digest"})");
    const std::vector<std::string> payloads = {payload};
    auto jobs = jobs_from(payloads, 0x0b9e6c1e00004000, 1);
    jobs[0].marked = false;
    auto out = deliver(*t, jobs);
    ASSERT_EQ(out[0].result, JobResult::Delivered) << out[0].error;
    EXPECT_EQ(hget("bull:mail:jbg-0b9e6c1e00004000", "name"), "digest");
    EXPECT_EQ(hget("bull:mail:jbg-0b9e6c1e00004000", "data"),
              R"({"group_id": "0b9e6c1e-0000-4000-8000-000000000001"})");
}

TEST(BullmqOptions, AQueueNameWithAColonIsRefused)
{
    EXPECT_THROW(jobbuf::test::make_target("bullmq", {}, "a:b"), std::runtime_error);
    EXPECT_NO_THROW(jobbuf::test::make_target("bullmq", {{"bullmq_queue", "ab"}}, "a:b"));
}
