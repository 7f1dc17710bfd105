// Tests of plan_delivery: the exact commands (RESP bytes) sent for list, stream and Sidekiq
// targets, and the push ranges that map commands back to jobs.
#include <gtest/gtest.h>

#include "redis/delivery.h"
#include "resp_helper.h"
#include "test_support.h"

using namespace jobbuf::redis;
using namespace jobbuf::test;

namespace {

constexpr double kNow = 1700000001.5;

StagedJob job(std::int64_t id, std::string_view payload, double run_at = 1700000000.0)
{
    StagedJob j;
    j.id = id;
    j.id_salt = 0x01020304;  // what the ids consumers see start with
    j.payload = payload;
    j.staged_at = 1700000000.25;
    j.run_at = run_at;
    return j;
}

DeliveryPlan plan(const QueueTarget& t, const std::vector<StagedJob>& jobs, std::string_view marker = "jobbuf:m:1")
{
    DeliveryPlan p;
    std::string error;
    EXPECT_TRUE(plan_delivery(t, jobs, marker, kNow, &p, &error)) << error;
    return p;
}

std::vector<std::pair<std::size_t, std::size_t>> ranges(const DeliveryPlan& p)
{
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (const auto& r : p.pushes)
        out.emplace_back(r.first, r.last);
    return out;
}

using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;

}  // namespace

TEST(PlanDelivery, ListIsOneRpushInIdOrder)
{
    auto t = jobbuf::test::make_target("list", {{"key", "jobbuf:mail"}});
    DeliveryPlan p = plan(*t, {job(3, R"({"a": 1})"), job(5, R"({"b": 2})"), job(9, "{}")});
    EXPECT_EQ(p.unit.wire(),
              "*1\r\n$5\r\nMULTI\r\n"
              "*5\r\n$5\r\nRPUSH\r\n$11\r\njobbuf:mail\r\n$8\r\n{\"a\": 1}\r\n$8\r\n{\"b\": 2}\r\n$2\r\n{}\r\n"
              "*3\r\n$3\r\nSET\r\n$10\r\njobbuf:m:1\r\n$5\r\n3,5,9\r\n"
              "*1\r\n$4\r\nEXEC\r\n");
    EXPECT_EQ(p.unit.command_count(), 4u);
    EXPECT_EQ(ranges(p), (Ranges{{0, 3}}));
}

TEST(PlanDelivery, EmptyBatchStillSetsTheMarker)
{
    auto t = jobbuf::test::make_target("list", {{"key", "k"}});
    DeliveryPlan p = plan(*t, {});
    EXPECT_EQ(p.unit.wire(), resp({{"MULTI"}, {"SET", "jobbuf:m:1", ""}, {"EXEC"}}));
    EXPECT_TRUE(p.pushes.empty());
}

TEST(PlanDelivery, StreamIsOneXaddPerJob)
{
    auto t = jobbuf::test::make_target("stream", {{"key", "events"}});
    DeliveryPlan p = plan(*t, {job(7, R"({"e": 1})"), job(8, R"({"e": 2})")}, "mk");
    EXPECT_EQ(p.unit.wire(),
              resp({{"MULTI"},
                    {"XADD", "events", "*", "id", "7", "uid", "010203040000000000000007", "payload", R"({"e": 1})"},
                    {"XADD", "events", "*", "id", "8", "uid", "010203040000000000000008", "payload", R"({"e": 2})"},
                    {"SET", "mk", "7,8"},
                    {"EXEC"}}));
    EXPECT_EQ(ranges(p), (Ranges{{0, 1}, {1, 2}}));
}

TEST(PlanDelivery, StreamWithMaxlen)
{
    auto t = jobbuf::test::make_target("stream", {{"key", "events"}, {"maxlen", "10000"}});
    DeliveryPlan p = plan(*t, {job(12345678901LL, "{}")}, "mk");
    EXPECT_EQ(p.unit.wire(), resp({{"MULTI"},
                                   {"XADD", "events", "MAXLEN", "~", "10000", "*", "id", "12345678901", "uid",
                                    "0102030400000002dfdc1c35", "payload", "{}"},
                                   {"SET", "mk", "12345678901"},
                                   {"EXEC"}}));
}

namespace {

// ns: the namespace option ("" for none).
std::unique_ptr<QueueTarget> sidekiq(const char* version, const char* ns = "")
{
    if (*ns == '\0')
        return jobbuf::test::make_target("sidekiq", {{"sidekiq_queue", "critical"}, {"sidekiq_version", version}}, "q");
    return jobbuf::test::make_target("sidekiq",
                                     {{"sidekiq_queue", "critical"}, {"namespace", ns}, {"sidekiq_version", version}},
                                     "q");
}

const std::string kJob1 =
    R"({"queue":"critical","jid":"010203040000000000000001","retry":true,"created_at":1700000000.250000,)"
    R"("enqueued_at":1700000001.500000,"args": [1], "class": "A"})";
const std::string kJob2 =
    R"({"queue":"critical","jid":"010203040000000000000002","retry":true,"created_at":1700000000.250000,)"
    R"("enqueued_at":1700000001.500000,"args": [2], "class": "A"})";

}  // namespace

TEST(PlanDelivery, SidekiqImmediateIsSaddAndOneLpush)
{
    DeliveryPlan p =
        plan(*sidekiq("7"), {job(1, R"({"args": [1], "class": "A"})"), job(2, R"({"args": [2], "class": "A"})")},
             "jobbuf:batch");
    EXPECT_EQ(p.unit.wire(), resp({{"MULTI"},
                                   {"SADD", "queues", "critical"},
                                   {"LPUSH", "queue:critical", kJob1, kJob2},
                                   {"SET", "jobbuf:batch", "1,2"},
                                   {"EXEC"}}));
    EXPECT_EQ(ranges(p), (Ranges{{0, 2}, {0, 2}}));
}

TEST(PlanDelivery, SidekiqNamespacePrefixesEveryKey)
{
    DeliveryPlan p = plan(*sidekiq("7", "myapp"), {job(1, R"({"args": [1], "class": "A"})")}, "m");
    EXPECT_EQ(p.unit.wire(), resp({{"MULTI"},
                                   {"SADD", "myapp:queues", "critical"},
                                   {"LPUSH", "myapp:queue:critical", kJob1},
                                   {"SET", "m", "1"},
                                   {"EXEC"}}));
}

TEST(PlanDelivery, SidekiqScheduledIsOneZadd)
{
    const double later = 1700003600.75;
    DeliveryPlan p = plan(*sidekiq("8", "ns"), {job(1, "{}", later), job(2, R"({"class": "B"})", later + 1)}, "m");
    EXPECT_EQ(
        p.unit.wire(),
        resp(
            {{"MULTI"},
             {"ZADD", "ns:schedule", "1700003600.750000",
              R"({"queue":"critical","jid":"010203040000000000000001","retry":true,"created_at":1700000000250})",
              "1700003601.750000",
              R"({"queue":"critical","jid":"010203040000000000000002","retry":true,"created_at":1700000000250,"class": "B"})"},
             {"SET", "m", "1,2"},
             {"EXEC"}}));
    EXPECT_EQ(ranges(p), (Ranges{{0, 2}}));
}

TEST(PlanDelivery, SidekiqMixedBatchKeepsIdOrderInRuns)
{
    const double later = kNow + 60;
    DeliveryPlan p = plan(*sidekiq("7"), {job(1, "{}"), job(2, "{}"), job(3, "{}", later), job(4, "{}", kNow)}, "m");
    // run_at == now counts as immediate.
    EXPECT_EQ(ranges(p), (Ranges{{0, 2}, {0, 2}, {2, 3}, {3, 4}, {3, 4}}));
    EXPECT_EQ(p.unit.command_count(), 8u);
    const std::string& w = p.unit.wire();
    std::size_t sadd1 = w.find("SADD"), lpush1 = w.find("LPUSH"), zadd = w.find("ZADD");
    std::size_t sadd2 = w.find("SADD", sadd1 + 1), lpush2 = w.find("LPUSH", lpush1 + 1);
    EXPECT_LT(sadd1, lpush1);
    EXPECT_LT(lpush1, zadd);
    EXPECT_LT(zadd, sadd2);
    EXPECT_LT(sadd2, lpush2);
    EXPECT_NE(lpush2, std::string::npos);
    EXPECT_EQ(w.find("enqueued_at", zadd), w.find("enqueued_at", sadd2));  // the scheduled job has none
}
