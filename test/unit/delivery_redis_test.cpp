// End-to-end tests of plan_delivery -> RedisConnection::execute -> read_delivery against a
// private redis-server: what arrives in Redis, the marker, and per-job outcomes.
#include <gtest/gtest.h>

#include "redis/delivery.h"
#include "test_support.h"

using namespace jobbuf::redis;
using namespace jobbuf::test;
using Kind = JobResult;

namespace {

class DeliveryRedisTest : public RedisServerTest {
protected:
    // Plans, executes and reads one batch; returns read_delivery's result.
    bool deliver(const QueueTarget& target, const std::vector<StagedJob>& jobs, std::vector<JobOutcome>* outcomes,
                 std::string* error, double now = 1700000001.5)
    {
        return jobbuf::test::deliver_batch(conn_, target, jobs, outcomes, error, now);
    }
};

}  // namespace

TEST_F(DeliveryRedisTest, ListArrivesInOrderWithMarker)
{
    auto t = jobbuf::test::make_target("list", {{"key", "jobbuf:mail"}});
    std::vector<std::string> payloads = {R"({"to": "a@x"})", R"({"to": "b@x"})", "{}"};
    std::vector<JobOutcome> out;
    std::string error;
    ASSERT_TRUE(deliver(*t, jobs_from(payloads, 10), &out, &error)) << error;
    EXPECT_EQ(error, "");
    ASSERT_EQ(out.size(), 3u);
    for (const auto& o : out)
        EXPECT_EQ(o.result, JobResult::Delivered);

    RedisReply list = command(conn_, {"LRANGE", "jobbuf:mail", "0", "-1"});
    ASSERT_EQ(list.elements.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i)
        EXPECT_EQ(list.elements[i].str, payloads[i]);
    RedisReply marker = command(conn_, {"GET", "jobbuf:marker:test"});
    EXPECT_EQ(marker.str, "10,11,12");
    std::vector<std::int64_t> ids;
    ASSERT_TRUE(parse_marker(marker.str, &ids));
    EXPECT_EQ(ids, (std::vector<std::int64_t>{10, 11, 12}));
}

TEST_F(DeliveryRedisTest, ListKeyOfWrongTypeRejectsTheJobs)
{
    command(conn_, {"SET", "jobbuf:mail", "i am a string"});
    auto t = jobbuf::test::make_target("list", {{"key", "jobbuf:mail"}});
    std::vector<JobOutcome> out;
    std::string error;
    ASSERT_TRUE(deliver(*t, jobs_from({"{}", "{}"}, 1), &out, &error)) << error;
    ASSERT_EQ(out.size(), 2u);
    for (const auto& o : out) {
        EXPECT_EQ(o.result, JobResult::Rejected);
        EXPECT_EQ(o.error.substr(0, 9), "WRONGTYPE");
    }
    EXPECT_EQ(command(conn_, {"GET", "jobbuf:mail"}).str, "i am a string");
    EXPECT_EQ(command(conn_, {"GET", "jobbuf:marker:test"}).str, "1,2");
}

TEST_F(DeliveryRedisTest, StreamEntriesCarryIdUidAndPayload)
{
    auto t = jobbuf::test::make_target("stream", {{"key", "events"}, {"maxlen", "1000"}});
    std::vector<JobOutcome> out;
    std::string error;
    ASSERT_TRUE(deliver(*t, jobs_from({R"({"n": 1})", R"({"n": 2})"}, 41, 0x5eedf00d), &out, &error)) << error;
    EXPECT_EQ(out[0].result, JobResult::Delivered);
    EXPECT_EQ(out[1].result, JobResult::Delivered);
    RedisReply range = command(conn_, {"XRANGE", "events", "-", "+"});
    ASSERT_EQ(range.elements.size(), 2u);
    const RedisReply& fields = range.elements[1].elements[1];
    ASSERT_EQ(fields.elements.size(), 6u);
    EXPECT_EQ(fields.elements[0].str, "id");
    EXPECT_EQ(fields.elements[1].str, "42");
    EXPECT_EQ(fields.elements[2].str, "uid");
    EXPECT_EQ(fields.elements[3].str, "5eedf00d000000000000002a");
    EXPECT_EQ(fields.elements[4].str, "payload");
    EXPECT_EQ(fields.elements[5].str, R"({"n": 2})");
}

TEST_F(DeliveryRedisTest, SidekiqImmediateAndScheduled)
{
    auto t = jobbuf::test::make_target("sidekiq", {{"sidekiq_queue", "default"}, {"namespace", "app"}});
    const std::vector<std::string> payloads = {R"({"class": "A"})", R"({"class": "B"})", R"({"class": "C"})"};
    std::vector<StagedJob> jobs = jobs_from(payloads, 1);  // the jobs view the payload strings
    jobs[2].run_at = 1700009999.5;
    std::vector<JobOutcome> out;
    std::string error;
    ASSERT_TRUE(deliver(*t, jobs, &out, &error)) << error;
    for (const auto& o : out)
        EXPECT_EQ(o.result, JobResult::Delivered);
    RedisReply queues = command(conn_, {"SMEMBERS", "app:queues"});
    ASSERT_EQ(queues.elements.size(), 1u);
    EXPECT_EQ(queues.elements[0].str, "default");
    // Sidekiq pops from the right: the first job comes out first.
    RedisReply first = command(conn_, {"RPOP", "app:queue:default"});
    EXPECT_NE(first.str.find(R"("class": "A")"), std::string::npos) << first.str;
    RedisReply second = command(conn_, {"RPOP", "app:queue:default"});
    EXPECT_NE(second.str.find(R"("class": "B")"), std::string::npos) << second.str;
    RedisReply scheduled = command(conn_, {"ZRANGE", "app:schedule", "0", "-1", "WITHSCORES"});
    ASSERT_EQ(scheduled.elements.size(), 2u);
    EXPECT_NE(scheduled.elements[0].str.find(R"("class": "C")"), std::string::npos);
    EXPECT_EQ(scheduled.elements[0].str.find("enqueued_at"), std::string::npos);
    EXPECT_EQ(scheduled.elements[1].str, "1700009999.5");
}

TEST_F(DeliveryRedisTest, QueuedErrorAbortsTheWholeTransaction)
{
    // A maxmemory so small that every write is refused at queue time: EXECABORT.
    ASSERT_EQ(command(conn_, {"CONFIG", "SET", "maxmemory", "1"}).str, "OK");
    auto t = jobbuf::test::make_target("list", {{"key", "jobbuf:mail"}});
    std::vector<JobOutcome> out;
    std::string error;
    EXPECT_FALSE(deliver(*t, jobs_from({"{}"}, 1), &out, &error));
    EXPECT_TRUE(out.empty());
    EXPECT_NE(error.find("EXECABORT"), std::string::npos) << error;
    EXPECT_NE(error.find("OOM"), std::string::npos) << error;
    ASSERT_EQ(command(conn_, {"CONFIG", "SET", "maxmemory", "0"}).str, "OK");
    EXPECT_EQ(command(conn_, {"EXISTS", "jobbuf:mail", "jobbuf:marker:test"}).integer, 0);
}
