// The `celery` target against a private redis-server: the exact message kombu's Redis transport
// would carry for a task (protocol 2, base64 body), task ids and delivery tags derived from the
// jobbuf id, eta for scheduled jobs, FIFO order, refused payloads and the group task; plus the
// small pieces it is built from (base64, ISO 8601, the JSON field reader). That a real Celery
// worker runs these messages is test/e2e/celery.sh's part.
#include <gtest/gtest.h>

#include "redis/base64.h"
#include "redis/delivery.h"
#include "redis/json_fields.h"
#include "redis/json_text.h"
#include "test_support.h"

using namespace jobbuf::redis;
using namespace jobbuf::test;

namespace {

constexpr double kNow = 1700000200.0;

class CeleryTargetTest : public RedisServerTest {
protected:
    CeleryTargetTest() : RedisServerTest(kNow) {}

    // The queue's messages in the order a worker's BRPOP takes them.
    std::vector<std::string> popped(const char* key)
    {
        std::vector<std::string> out;
        for (const auto& e : command(conn_, {"LRANGE", key, "0", "-1"}).elements)
            out.insert(out.begin(), e.str);
        return out;
    }
};

std::string without_origin(std::string message)
{
    std::size_t at = message.find(",\"origin\":\"jobbuf@");
    std::size_t end = message.find('"', at + 18);
    if (at != std::string::npos)
        message.erase(at, end + 1 - at);
    return message;
}

}  // namespace

TEST_F(CeleryTargetTest, ATaskIsTheMessageKombuWouldCarry)
{
    auto t = jobbuf::test::make_target("celery", {}, "q");
    std::vector<std::string> payloads = {R"({"args": [1, 2], "task": "proj.add", "kwargs": {"k": "v"}})"};
    auto out = deliver(*t, jobs_from(payloads, 1, 0xabcd));
    ASSERT_EQ(out[0].result, JobResult::Delivered) << out[0].error;
    auto messages = popped("celery");
    ASSERT_EQ(messages.size(), 1u);
    EXPECT_EQ(
        without_origin(messages[0]),
        R"({"body":"W1sxLCAyXSwgeyJrIjogInYifSwgeyJjYWxsYmFja3MiOiBudWxsLCAiZXJyYmFja3MiOiBudWxsLCAiY2hhaW4iOiBudWxsLCAiY2hvcmQiOiBudWxsfV0=",)"
        R"("content-encoding":"utf-8","content-type":"application/json",)"
        R"("headers":{"lang":"py","task":"proj.add","id":"0000abcd-6a62-8000-8000-000000000001","shadow":null,)"
        R"("eta":null,"expires":null,"group":null,"group_index":null,"retries":0,"timelimit":[null,null],)"
        R"("root_id":"0000abcd-6a62-8000-8000-000000000001","parent_id":null,"argsrepr":"[1, 2]",)"
        R"("kwargsrepr":"{\"k\": \"v\"}","ignore_result":false},)"
        R"("properties":{"correlation_id":"0000abcd-6a62-8000-8000-000000000001","delivery_mode":2,)"
        R"("delivery_info":{"exchange":"","routing_key":"celery"},"priority":0,"body_encoding":"base64",)"
        R"("delivery_tag":"0000abcd-6a62-8100-8000-000000000001"}})");
    EXPECT_NE(messages[0].find(",\"origin\":\"jobbuf@"), std::string::npos);
    EXPECT_EQ(command(conn_, {"GET", "jobbuf:marker:test"}).str, "1");
}

TEST_F(CeleryTargetTest, DefaultsAnEtaAndFifoOrderOnTheQueueOption)
{
    auto t = jobbuf::test::make_target("celery", {{"celery_queue", "{app}.mail"}}, "q");
    std::vector<std::string> payloads = {R"({"task": "a"})", R"({"task": "b"})", R"({"task": "c"})"};
    auto jobs = jobs_from(payloads, 10, 1);
    jobs[2].run_at = 1700000160.5;  // scheduled: kept in Postgres until due, sent with its eta
    auto out = deliver(*t, jobs);
    for (const auto& o : out)
        EXPECT_EQ(o.result, JobResult::Delivered) << o.error;
    auto messages = popped("{app}.mail");
    ASSERT_EQ(messages.size(), 3u);
    EXPECT_NE(
        messages[0].find(
            R"("body":"W1tdLCB7fSwgeyJjYWxsYmFja3MiOiBudWxsLCAiZXJyYmFja3MiOiBudWxsLCAiY2hhaW4iOiBudWxsLCAiY2hvcmQiOiBudWxsfV0=")"),
        std::string::npos);
    EXPECT_NE(messages[0].find(R"("task":"a","id":"00000001-6a62-8000-8000-00000000000a")"), std::string::npos);
    EXPECT_NE(messages[1].find(R"("task":"b")"), std::string::npos);
    EXPECT_NE(messages[2].find(R"("eta":"2023-11-14T22:16:00.500000+00:00")"), std::string::npos);
    EXPECT_NE(messages[0].find(R"("eta":null)"), std::string::npos);
    EXPECT_NE(messages[0].find(R"("routing_key":"{app}.mail")"), std::string::npos);
}

TEST_F(CeleryTargetTest, APayloadThatIsNotATaskIsRefusedAlone)
{
    auto t = jobbuf::test::make_target("celery", {}, "q");
    std::vector<std::string> payloads = {R"({"task": "ok"})", R"({"args": []})", R"({"task": 1})",
                                         R"({"task": "x", "args": {}})", "{"};
    auto out = deliver(*t, jobs_from(payloads, 1, 1));
    ASSERT_EQ(out.size(), payloads.size());
    expect_first_delivered_rest_rejected(out, "not a Celery task");
    EXPECT_EQ(command(conn_, {"LLEN", "celery"}).integer, 1);
}

TEST_F(CeleryTargetTest, AGroupIsTheGroupClassTaskWithTheGroupId)
{
    auto t = jobbuf::test::make_target("celery", {{"group_class", "proj.digest"}}, "q");
    std::string payload;
    const std::int64_t ids[] = {5};
    t->append_group_payload("0b9e6c1e-0000-4000-8000-000000000001", ids, 1, &payload);
    EXPECT_EQ(payload, R"({"args": ["0b9e6c1e-0000-4000-8000-000000000001"], "task": "proj.digest"})");
    const std::vector<std::string> payloads = {payload};
    auto jobs = jobs_from(payloads, 0x7b9e6c1e00004000, 1);
    jobs[0].marked = false;
    auto out = deliver(*t, jobs);
    ASSERT_EQ(out[0].result, JobResult::Delivered) << out[0].error;
    auto messages = popped("celery");
    ASSERT_EQ(messages.size(), 1u);
    // kind 2 (a group's task); the id's top two bits give way to the UUID variant
    EXPECT_NE(messages[0].find(R"("id":"00000001-6a62-8200-bb9e-6c1e00004000")"), std::string::npos) << messages[0];
    EXPECT_NE(messages[0].find(R"("task":"proj.digest")"), std::string::npos);
}

TEST(CeleryPieces, Base64)
{
    const std::pair<std::string, std::string> cases[] = {
        {"", ""},        {"f", "Zg=="},        {"fo", "Zm8="},
        {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {std::string("\xff\xfe\x00", 3), "//4A"}};
    for (const auto& c : cases) {
        std::string out;
        append_base64(c.first, &out);
        EXPECT_EQ(out, c.second);
        EXPECT_EQ(out.size(), base64_size(c.first.size()));
    }
}

TEST(CeleryPieces, Iso8601)
{
    std::string out;
    append_iso8601_utc(1700000160.5, &out);
    EXPECT_EQ(out, "2023-11-14T22:16:00.500000+00:00");
    out.clear();
    append_iso8601_utc(951782400.000001, &out);  // a leap day
    EXPECT_EQ(out, "2000-02-29T00:00:00.000001+00:00");
}

TEST(JsonFields, FindsTopLevelValuesOnly)
{
    static constexpr std::string_view names[] = {"a", "b", "c"};
    std::string_view values[3];
    ASSERT_TRUE(
        json_object_fields(R"({"x": {"a": 1}, "b": [1, "]}", {"c": 2}], "a": "q\"}", "n": null})", names, 3, values));
    EXPECT_EQ(values[0], R"("q\"}")");
    EXPECT_EQ(values[1], R"([1, "]}", {"c": 2}])");
    EXPECT_EQ(values[2].data(), nullptr);
    EXPECT_TRUE(json_object_fields("{}", names, 3, values));
    EXPECT_FALSE(json_object_fields(R"({"a": 1)", names, 3, values));
    EXPECT_FALSE(json_object_fields(R"({"a": [1})", names, 3, values));
    EXPECT_FALSE(json_object_fields(R"([1])", names, 3, values));
    EXPECT_FALSE(json_object_fields(R"({"a" 1})", names, 3, values));
}

TEST(JsonFields, DecodesStrings)
{
    std::string out;
    ASSERT_TRUE(json_string_value(R"("a\"\\\/\n\u00e9\ud83d\ude00")", &out));
    EXPECT_EQ(out, "a\"\\/\n\xc3\xa9\xf0\x9f\x98\x80");
    EXPECT_FALSE(json_string_value(R"("\ud83d")", &out));
    EXPECT_FALSE(json_string_value(R"("\x")", &out));
    EXPECT_FALSE(json_string_value("5", &out));
    long long v = 0;
    EXPECT_TRUE(json_small_integer("2097151", 2097151, &v));
    EXPECT_EQ(v, 2097151);
    EXPECT_FALSE(json_small_integer("2097152", 2097151, &v));
    EXPECT_FALSE(json_small_integer("1.5", 10, &v));
    EXPECT_FALSE(json_small_integer("-1", 10, &v));
}
