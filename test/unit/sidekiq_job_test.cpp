// Tests of the Sidekiq job encoder: exact JSON for fixed jobs, and Ruby's JSON.parse accepting it.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <unistd.h>

#include "redis/json_text.h"
#include "redis/targets/queue_target.h"
#include "redis/targets/sidekiq_job.h"

using namespace jobbuf::redis;

namespace {

SidekiqOptions sidekiq_target(int version)
{
    SidekiqOptions t;
    t.sidekiq_queue = "default";
    t.sidekiq_version = version;
    return t;
}

StagedJob fixed_job(std::string_view payload)
{
    StagedJob job;
    job.id = 42;
    job.id_salt = 0xdeadbeef;
    job.payload = payload;
    job.staged_at = 1700000000.25;
    job.run_at = 1700000000.0;
    return job;
}

std::string encode(const SidekiqOptions& t, const StagedJob& job, bool immediate, double now = 1700000001.5)
{
    std::string out;
    append_sidekiq_job(t, job, immediate, now, &out);
    return out;
}

constexpr const char* kPayload = R"({"args": [1, "x"], "class": "HardWorker"})";

}  // namespace

TEST(SidekiqJob, Version7Immediate)
{
    EXPECT_EQ(encode(sidekiq_target(7), fixed_job(kPayload), true),
              R"({"queue":"default","jid":"deadbeef000000000000002a","retry":true,)"
              R"("created_at":1700000000.250000,"enqueued_at":1700000001.500000,)"
              R"("args": [1, "x"], "class": "HardWorker"})");
}

TEST(SidekiqJob, Version8UsesIntegerMilliseconds)
{
    EXPECT_EQ(encode(sidekiq_target(8), fixed_job(kPayload), true),
              R"({"queue":"default","jid":"deadbeef000000000000002a","retry":true,)"
              R"("created_at":1700000000250,"enqueued_at":1700000001500,)"
              R"("args": [1, "x"], "class": "HardWorker"})");
}

TEST(SidekiqJob, ScheduledHasNoEnqueuedAt)
{
    EXPECT_EQ(encode(sidekiq_target(6), fixed_job(kPayload), false),
              R"({"queue":"default","jid":"deadbeef000000000000002a","retry":true,)"
              R"("created_at":1700000000.250000,"args": [1, "x"], "class": "HardWorker"})");
}

TEST(SidekiqJob, PayloadRetryIsKept)
{
    StagedJob job = fixed_job(R"({"args": [], "class": "W", "retry": 3})");
    job.payload_has_probed_key = true;
    EXPECT_EQ(encode(sidekiq_target(7), job, true), R"({"queue":"default","jid":"deadbeef000000000000002a",)"
                                                    R"("created_at":1700000000.250000,"enqueued_at":1700000001.500000,)"
                                                    R"("args": [], "class": "W", "retry": 3})");
}

TEST(SidekiqJob, EmptyObjectHasNoStrayComma)
{
    EXPECT_EQ(encode(sidekiq_target(8), fixed_job("{}"), false),
              R"({"queue":"default","jid":"deadbeef000000000000002a","retry":true,"created_at":1700000000250})");
    EXPECT_EQ(encode(sidekiq_target(8), fixed_job("{ }"), false),
              R"({"queue":"default","jid":"deadbeef000000000000002a","retry":true,"created_at":1700000000250})");
}

TEST(SidekiqJob, JidIsStableLowercaseHex)
{
    std::string jid;
    StagedJob job;
    job.id_salt = 0x0000abcd;
    job.id = 0x7fffffffffffffffLL;
    append_job_uid(job, &jid);
    EXPECT_EQ(jid, "0000abcd7fffffffffffffff");
    jid.clear();
    job.id_salt = 0;
    job.id = 1;
    append_job_uid(job, &jid);
    EXPECT_EQ(jid, "000000000000000000000001");
    EXPECT_EQ(jid.size(), 24u);
}

// A periodic job's tick (StagedJob::tick_id) gives the ids: two stagings of one tick, with other
// job ids, show the same jid; a job without a tick keeps the jid of its id.
TEST(SidekiqJob, TickJobsTakeTheirIdsFromTheTick)
{
    std::string first, second, plain;
    StagedJob job;
    job.id_salt = 0x0000abcd;
    job.tick_id = 0x2000000000000123LL;
    job.id = 41;
    append_job_uid(job, &first);
    job.id = 97;
    append_job_uid(job, &second);
    EXPECT_EQ(first, "0000abcd2000000000000123");
    EXPECT_EQ(second, first);
    job.tick_id = 0;
    append_job_uid(job, &plain);
    EXPECT_EQ(plain, "0000abcd0000000000000061");
}

TEST(SidekiqJob, QueueNameIsEscaped)
{
    SidekiqOptions t = sidekiq_target(7);
    t.sidekiq_queue = "we\"ird\\q\n";
    std::string out = encode(t, fixed_job("{}"), false);
    EXPECT_EQ(out.substr(0, 29), R"({"queue":"we\"ird\\q\n","jid")");
}

TEST(JsonText, EpochSecondsAlwaysHaveADecimalPoint)
{
    for (double v : {0.0, 1.0, 1700000000.0, 1e15, 1e20, -1.5, 123.4567891}) {
        std::string s;
        append_epoch_seconds(v, &s);
        EXPECT_NE(s.find('.'), std::string::npos) << s;
        EXPECT_EQ(s.find('e'), std::string::npos) << s;
        EXPECT_EQ(s.find('E'), std::string::npos) << s;
    }
    std::string s;
    append_epoch_seconds(1700000000.0, &s);
    EXPECT_EQ(s, "1700000000.000000");
    s.clear();
    append_epoch_seconds(std::numeric_limits<double>::quiet_NaN(), &s);
    EXPECT_EQ(s, "0.000000");
    s.clear();
    append_epoch_millis(1700000000.0005, &s);
    EXPECT_EQ(s, "1700000000001");
}

TEST(JsonText, ControlCharactersAreEscaped)
{
    std::string s;
    append_json_string(std::string("a\x01\tb\x7f", 5), &s);
    EXPECT_EQ(s, "\"a\\u0001\\tb\\u007f\"");
}

// Ruby's JSON.parse is what Sidekiq uses: every encoded job must parse, with Float timestamps for
// versions 6/7 and Integer milliseconds for version 8.
TEST(SidekiqJob, RubyJsonParseAcceptsTheJobs)
{
    if (access("/usr/bin/ruby", X_OK) != 0)
        GTEST_SKIP() << "ruby not installed";
    char path[] = "/tmp/jobbuf-sidekiq-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    {
        std::ofstream lines(path);
        for (int version : {6, 7, 8}) {
            for (const char* payload : {kPayload, "{}", R"({"args": [{"a": null}], "class": "A::B", "tags": ["t"]})"}) {
                for (bool immediate : {true, false}) {
                    SidekiqOptions t = sidekiq_target(version);
                    t.sidekiq_queue = "q.1:x-y_z";
                    lines << version << '\t' << encode(t, fixed_job(payload), immediate) << '\n';
                }
            }
        }
    }
    std::string cmd = std::string("/usr/bin/ruby -rjson -e '") +
                      "n = 0; STDIN.each_line { |l| v, j = l.chomp.split(\"\\t\", 2); h = JSON.parse(j); "
                      "t = v.to_i >= 8 ? Integer : Float; "
                      "raise \"bad #{j}\" unless h[\"created_at\"].is_a?(t) && h[\"jid\"] =~ /\\A[0-9a-f]{24}\\z/ && "
                      "h[\"queue\"] == \"q.1:x-y_z\" && h[\"retry\"] == true && "
                      "(h[\"enqueued_at\"].nil? || h[\"enqueued_at\"].is_a?(t)); n += 1 }; print n' < " +
                      path + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        out.append(buf, n);
    int rc = pclose(p);
    unlink(path);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(out, "18");
}
