// Tests of the large-payload path of the pure C++ layer: large arguments referenced (not copied) by
// a CommandPipeline and sent intact; jobs longer than Redis's bulk limit left out of the unit and
// off the marker (TooLarge); and, against a real redis-server with a small proto-max-bulk-len, the
// protocol error Redis sends before closing the connection read as a refusal.
#include <gtest/gtest.h>

#include "redis/command_pipeline.h"
#include "redis/delivery.h"
#include "redis/targets/sidekiq_job.h"
#include "resp_helper.h"
#include "test_support.h"

using namespace jobbuf::redis;
using namespace jobbuf::test;

namespace {

StagedJob job(std::int64_t id, std::string_view payload)
{
    StagedJob j;
    j.id = id;
    j.payload = payload;
    j.staged_at = 1700000000.25;
    j.run_at = 1700000000.0;
    return j;
}

std::unique_ptr<QueueTarget> list_target()
{
    return jobbuf::test::make_target("list", {{"key", "q"}});
}

}  // namespace

TEST(LargePayload, LargeArgumentIsReferencedNotCopied)
{
    const std::string big(CommandPipeline::kReferenceAtLeast, 'b');
    CommandPipeline b;
    b.add({"RPUSH", "q", "small", big});
    EXPECT_EQ(b.wire(), resp({{"RPUSH", "q", "small", big}}));
    std::vector<std::string_view> pieces = b.pieces();
    ASSERT_EQ(pieces.size(), 3u);
    EXPECT_EQ(pieces[1].data(), big.data()) << "the large argument is sent from where it is";
    EXPECT_EQ(b.size(), b.wire().size());
}

TEST(LargePayload, TwoPartArgumentIsOneBulkString)
{
    const std::string tail(CommandPipeline::kReferenceAtLeast + 3, 't');
    CommandPipeline b;
    b.begin(2);
    b.arg("LPUSH");
    b.arg("head:", tail);
    EXPECT_EQ(b.wire(), resp({{"LPUSH", "head:" + tail}}));
    CommandPipeline small;
    small.begin(1);
    small.arg("ab", "cd");
    EXPECT_EQ(small.wire(), resp({{"abcd"}}));
    EXPECT_EQ(small.pieces().size(), 1u);
}

TEST(LargePayload, SidekiqHeadAndTailAreTheWholeJob)
{
    SidekiqOptions t;
    t.sidekiq_queue = "q";
    for (std::string_view payload : {std::string_view(R"({"class": "A", "args": []})"), std::string_view("{}")}) {
        StagedJob j = job(7, payload);
        std::string head, whole;
        std::string_view tail = sidekiq_job_head(t, j, true, 1700000001.5, &head);
        append_sidekiq_job(t, j, true, 1700000001.5, &whole);
        EXPECT_EQ(head + std::string(tail), whole);
        EXPECT_LE(head.size(), sidekiq_head_bound(t));
        EXPECT_EQ(tail.data() + tail.size(), payload.data() + payload.size()) << "the tail is the payload's own bytes";
    }
}

TEST(LargePayload, JobOverTheBulkLimitIsLeftOutAndNotMarked)
{
    const std::string too_big(101, 'x');
    std::vector<StagedJob> jobs = {job(1, "a"), job(2, too_big), job(3, "c")};
    jobs.push_back(job(4, ""));
    jobs.back().known_too_large = 5000;  // never rendered by the take
    DeliveryPlan p;
    std::string error;
    ASSERT_TRUE(plan_delivery(*list_target(), jobs, "m", 1700000001.0, &p, &error, 100));
    EXPECT_EQ(p.unit.wire(), resp({{"MULTI"}, {"RPUSH", "q", "a", "c"}, {"SET", "m", "1,3"}, {"EXEC"}}));

    RedisReply ok;
    ok.type = RedisReply::Type::Status;
    ok.str = "OK";
    RedisReply queued = ok;
    queued.str = "QUEUED";
    RedisReply pushed;
    pushed.type = RedisReply::Type::Integer;
    pushed.integer = 2;
    RedisReply exec;
    exec.type = RedisReply::Type::Array;
    exec.elements = {pushed, ok};
    std::vector<JobOutcome> outcomes;
    ASSERT_TRUE(read_delivery(p, {ok, queued, queued, exec}, jobs.size(), &outcomes, &error)) << error;
    EXPECT_EQ(outcomes[0].result, JobResult::Delivered);
    EXPECT_EQ(outcomes[1].result, JobResult::TooLarge);
    EXPECT_EQ(outcomes[1].error, "the job is 101 bytes as sent to Redis, more than Redis accepts "
                                 "(proto-max-bulk-len 100 bytes); it was not sent");
    EXPECT_EQ(outcomes[2].result, JobResult::Delivered);
    EXPECT_EQ(outcomes[3].result, JobResult::TooLarge);
    EXPECT_NE(outcomes[3].error.find("at least 5000 bytes"), std::string::npos) << outcomes[3].error;
}

TEST(LargePayload, SidekiqSizeCountsTheEnvelope)
{
    auto t = jobbuf::test::make_target("sidekiq", {{"sidekiq_queue", "q"}});
    const std::string payload = "{\"class\": \"A\", \"args\": [\"" + std::string(1000, 'p') + "\"]}";
    std::string whole;
    SidekiqOptions options;
    options.sidekiq_queue = "q";
    append_sidekiq_job(options, job(1, payload), true, 1700000001.5, &whole);
    DeliveryPlan p;
    std::string error;
    ASSERT_TRUE(plan_delivery(*t, {job(1, payload)}, "m", 1700000001.5, &p, &error, whole.size()));
    EXPECT_TRUE(p.oversized.empty()) << "exactly at the limit: sent";
    ASSERT_TRUE(plan_delivery(*t, {job(1, payload)}, "m", 1700000001.5, &p, &error, whole.size() - 1));
    ASSERT_EQ(p.oversized.size(), 1u) << "one byte over because of the envelope: left out";
    EXPECT_EQ(p.oversized[0].bytes, whole.size());
    EXPECT_EQ(p.unit.wire(), resp({{"MULTI"}, {"SET", "m", ""}, {"EXEC"}}));
}

TEST(LargePayload, ReferencedPayloadArrivesIntact)
{
    RedisServer server;
    ASSERT_TRUE(server.start());
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, server.url()).ok());
    std::string big(3 * 1024 * 1024 + 17, '\0');
    for (std::size_t i = 0; i < big.size(); ++i)
        big[i] = static_cast<char>('a' + i % 26);
    std::vector<StagedJob> jobs = {job(1, "first"), job(2, big), job(3, "last")};
    DeliveryPlan p;
    std::string error;
    ASSERT_TRUE(plan_delivery(*list_target(), jobs, "m", 0, &p, &error));
    PollWaiter waiter;
    std::vector<RedisReply> replies;
    RedisStatus st = conn.execute(p.unit, &replies, 5000, waiter);
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_EQ(command(conn, {"LINDEX", "q", "1"}).str, big);
    EXPECT_EQ(command(conn, {"LINDEX", "q", "2"}).str, "last");
}

TEST(LargePayload, ProtocolErrorBeforeTheCloseIsARefusal)
{
    RedisServer server;
    ASSERT_TRUE(server.start({"--proto-max-bulk-len", "1mb"}));
    RedisConnection conn;
    ASSERT_TRUE(connect_url(conn, server.url()).ok());
    std::string big(4 * 1024 * 1024, 'z');
    CommandPipeline b;
    b.add({"RPUSH", "q", big});
    PollWaiter waiter;
    std::vector<RedisReply> replies;
    RedisStatus st = conn.execute(b, &replies, 5000, waiter);
    EXPECT_EQ(st.code, RedisStatus::Code::RequestRefused) << st.message;
    EXPECT_NE(st.message.find("Protocol error"), std::string::npos) << st.message;
    EXPECT_FALSE(conn.connected());
}
