// Tests of read_delivery: per-job outcomes from a transaction's replies, and the cases where the
// transaction as a whole did not run.
#include <gtest/gtest.h>

#include "redis/delivery.h"
#include "test_support.h"

using namespace jobbuf::redis;
using Kind = JobResult;

namespace {

RedisReply status(const char* s)
{
    RedisReply r;
    r.type = RedisReply::Type::Status;
    r.str = s;
    return r;
}

RedisReply error(const char* s)
{
    RedisReply r;
    r.type = RedisReply::Type::Error;
    r.str = s;
    return r;
}

RedisReply integer(long long v)
{
    RedisReply r;
    r.type = RedisReply::Type::Integer;
    r.integer = v;
    return r;
}

RedisReply array(std::vector<RedisReply> elements)
{
    RedisReply r;
    r.type = RedisReply::Type::Array;
    r.elements = std::move(elements);
    return r;
}

const char* kWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value";
const char* kOom = "OOM command not allowed when used memory > 'maxmemory'.";

DeliveryPlan stream_plan(std::size_t jobs)
{
    auto t = jobbuf::test::make_target("stream", {{"key", "s"}});
    std::vector<StagedJob> staged(jobs);
    for (std::size_t i = 0; i < jobs; ++i) {
        staged[i].id = static_cast<std::int64_t>(i + 1);
        staged[i].payload = "{}";
    }
    DeliveryPlan p;
    std::string err;
    EXPECT_TRUE(plan_delivery(*t, staged, "m", 0, &p, &err));
    return p;
}

// MULTI ok, every command QUEUED, EXEC answers exec_elements.
std::vector<RedisReply> replies_for(const DeliveryPlan& p, std::vector<RedisReply> exec_elements)
{
    std::vector<RedisReply> r = {status("OK")};
    for (std::size_t i = 0; i < p.pushes.size() + 1; ++i)
        r.push_back(status("QUEUED"));
    r.push_back(array(std::move(exec_elements)));
    return r;
}

}  // namespace

TEST(ReadDelivery, AllDelivered)
{
    DeliveryPlan p = stream_plan(3);
    std::vector<JobOutcome> out;
    std::string err;
    ASSERT_TRUE(
        read_delivery(p, replies_for(p, {status("1-1"), status("1-2"), status("1-3"), status("OK")}), 3, &out, &err));
    EXPECT_EQ(err, "");
    ASSERT_EQ(out.size(), 3u);
    for (const auto& o : out)
        EXPECT_EQ(o.result, JobResult::Delivered);
}

TEST(ReadDelivery, WrongTypeRejectsOnlyItsJob)
{
    DeliveryPlan p = stream_plan(3);
    std::vector<JobOutcome> out;
    std::string err;
    ASSERT_TRUE(read_delivery(p, replies_for(p, {status("1-1"), error(kWrongType), status("1-3"), status("OK")}), 3,
                              &out, &err));
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].result, JobResult::Delivered);
    EXPECT_EQ(out[1].result, JobResult::Rejected);
    EXPECT_EQ(out[1].error, kWrongType);
    EXPECT_EQ(out[2].result, JobResult::Delivered);
    EXPECT_EQ(out[2].error, "");
}

TEST(ReadDelivery, TransientElementErrorMeansRetry)
{
    DeliveryPlan p = stream_plan(2);
    std::vector<JobOutcome> out;
    std::string err;
    ASSERT_TRUE(read_delivery(p, replies_for(p, {error(kOom), status("1-2"), status("OK")}), 2, &out, &err));
    EXPECT_EQ(out[0].result, JobResult::Retry);
    EXPECT_EQ(out[0].error, kOom);
    EXPECT_EQ(out[1].result, JobResult::Delivered);
}

TEST(ReadDelivery, ListErrorCoversEveryJob)
{
    auto t = jobbuf::test::make_target("list", {{"key", "l"}});
    std::vector<StagedJob> jobs(4);
    for (auto& j : jobs)
        j.payload = "{}";
    DeliveryPlan p;
    std::string err;
    ASSERT_TRUE(plan_delivery(*t, jobs, "m", 0, &p, &err));
    std::vector<JobOutcome> out;
    ASSERT_TRUE(read_delivery(p, replies_for(p, {error(kWrongType), status("OK")}), 4, &out, &err));
    ASSERT_EQ(out.size(), 4u);
    for (const auto& o : out) {
        EXPECT_EQ(o.result, JobResult::Rejected);
        EXPECT_EQ(o.error, kWrongType);
    }
}

TEST(ReadDelivery, SidekiqJobNeedsSaddAndLpush)
{
    auto t = jobbuf::test::make_target("sidekiq", {{"sidekiq_queue", "q"}});
    std::vector<StagedJob> jobs(2);
    for (auto& j : jobs)
        j.payload = "{}";
    DeliveryPlan p;
    std::string err;
    ASSERT_TRUE(plan_delivery(*t, jobs, "m", 10, &p, &err));
    std::vector<JobOutcome> out;
    ASSERT_TRUE(read_delivery(p, replies_for(p, {error(kWrongType), integer(2), status("OK")}), 2, &out, &err));
    EXPECT_EQ(out[0].result, JobResult::Rejected);
    EXPECT_EQ(out[1].result, JobResult::Rejected);
    ASSERT_TRUE(read_delivery(p, replies_for(p, {integer(0), integer(2), status("OK")}), 2, &out, &err));
    EXPECT_EQ(out[0].result, JobResult::Delivered);
    EXPECT_EQ(out[1].result, JobResult::Delivered);
}

TEST(ReadDelivery, ExecAbortMeansNothingRan)
{
    DeliveryPlan p = stream_plan(2);
    std::vector<RedisReply> r = {status("OK"), status("QUEUED"), error(kOom), status("QUEUED"),
                                 error("EXECABORT Transaction discarded because of previous errors.")};
    std::vector<JobOutcome> out;
    std::string err;
    EXPECT_FALSE(read_delivery(p, r, 2, &out, &err));
    EXPECT_TRUE(out.empty());
    EXPECT_NE(err.find("EXECABORT"), std::string::npos) << err;
    EXPECT_NE(err.find("OOM command not allowed"), std::string::npos) << err;
}

TEST(ReadDelivery, MultiRefused)
{
    DeliveryPlan p = stream_plan(1);
    std::vector<RedisReply> r = {error("ERR MULTI calls can not be nested"), status("QUEUED"), status("QUEUED"),
                                 array({status("1-1"), status("OK")})};
    std::vector<JobOutcome> out;
    std::string err;
    EXPECT_FALSE(read_delivery(p, r, 1, &out, &err));
    EXPECT_NE(err.find("MULTI"), std::string::npos);
}

TEST(ReadDelivery, ExecErrorOrNilOrMalformed)
{
    DeliveryPlan p = stream_plan(1);
    std::vector<JobOutcome> out;
    std::string err;
    std::vector<RedisReply> r = replies_for(p, {});
    r.back() = error("ERR EXEC without MULTI");
    EXPECT_FALSE(read_delivery(p, r, 1, &out, &err));
    EXPECT_NE(err.find("EXEC without MULTI"), std::string::npos);
    r.back() = RedisReply();  // Nil
    EXPECT_FALSE(read_delivery(p, r, 1, &out, &err));
    EXPECT_NE(err.find("nil"), std::string::npos);
    r.back() = array({status("1-1")});  // one element short
    EXPECT_FALSE(read_delivery(p, r, 1, &out, &err));
    r.pop_back();  // one reply short
    EXPECT_FALSE(read_delivery(p, r, 1, &out, &err));
    EXPECT_FALSE(read_delivery(p, replies_for(p, {status("1-1"), status("OK")}), 0, &out, &err));  // wrong job count
}

TEST(ReadDelivery, FailedMarkerIsReportedButPushesStand)
{
    DeliveryPlan p = stream_plan(1);
    std::vector<JobOutcome> out;
    std::string err;
    ASSERT_TRUE(read_delivery(p, replies_for(p, {status("1-1"), error(kOom)}), 1, &out, &err));
    EXPECT_EQ(out[0].result, JobResult::Delivered);
    EXPECT_NE(err.find("marker"), std::string::npos);
}
