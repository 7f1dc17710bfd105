// The delivery lease on a Redis Cluster (session_lease.cpp, cluster/cluster_session.cpp), against
// a real one-node cluster: two drain sessions with one client name and one lease key (a clone
// beside its original). The clone finds the lease held: it is not connected and has fenced
// nothing (the original's links and a connection of that name live on); the original goes on
// delivering and refreshing; a lease no longer refreshed lapses for the clone by the same rule as
// on a single server.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redis/drain_session.h"
#include "redis/free_with.h"
#include "test_support.h"

using namespace jobbuf::redis;
using namespace jobbuf::test;

namespace {

constexpr const char* kClientName = "jobbuf-unit-cluster-lease";
constexpr const char* kLeaseKey = "jobbuf:lease:unit-cluster";

using Session = std::unique_ptr<DrainSession, FreeWith<drain_session_destroy>>;

class ClusterLeaseTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_TRUE(server_.start({"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port",
                                   std::to_string(free_port())}));
        ASSERT_TRUE(connect_url(admin_, server_.url()).ok());
        RedisReply added = command(admin_, {"CLUSTER", "ADDSLOTSRANGE", "0", "16383"});
        ASSERT_FALSE(added.is_error()) << added.str;
        for (int i = 0;
             i < 500 && command(admin_, {"CLUSTER", "INFO"}).str.find("cluster_state:ok") == std::string::npos; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        ASSERT_NE(command(admin_, {"CLUSTER", "INFO"}).str.find("cluster_state:ok"), std::string::npos);
        url_ = "redis+cluster://127.0.0.1:" + std::to_string(server_.port());
    }

    Session session(const char* lease_value, long timeout_ms = 2000)
    {
        Session s{drain_session_create()};
        SessionSettings settings;
        settings.redis_url = url_.c_str();
        settings.timeout_ms = timeout_ms;
        settings.client_name = kClientName;
        EXPECT_EQ(drain_session_configure(s.get(), settings).status, SessionReport::Status::Ok);
        drain_session_set_marker_key(s.get(), "jobbuf:unit:cluster-lease:marker");
        drain_session_set_lease(s.get(), kLeaseKey, lease_value);
        return s;
    }

    SessionReport connect(DrainSession* s, bool* fresh) { return drain_session_connect(s, waiter_, fresh); }

    SessionReport deliver(DrainSession* s, std::int64_t id)
    {
        payload_ = "{\"n\":" + std::to_string(id) + "}";
        StagedJob job;
        job.id = id;
        job.payload = payload_;
        auto target = make_target("list", {{"key", "{unit}:jobs"}});
        JobResult result{};
        char reject[kMessageLen];
        return drain_session_deliver(s, waiter_, target.get(), &job, 1, 0, &result, reject, sizeof reject);
    }

    // The ids of the clients named kClientName, as CLIENT LIST shows them.
    std::vector<std::string> named_clients()
    {
        std::vector<std::string> ids;
        std::string list = command(admin_, {"CLIENT", "LIST"}).str;
        std::size_t at = 0;
        while (at < list.size()) {
            std::size_t end = list.find('\n', at);
            std::string line = list.substr(at, end == std::string::npos ? std::string::npos : end - at);
            if (line.find(" name=" + std::string(kClientName) + " ") != std::string::npos)
                ids.push_back(line.substr(0, line.find(' ')));
            at = end == std::string::npos ? list.size() : end + 1;
        }
        return ids;
    }

    RedisServer server_;
    RedisConnection admin_;
    PollWaiter waiter_;
    std::string url_;
    std::string payload_;
};

TEST_F(ClusterLeaseTest, CloneFindsTheLeaseHeldAndFencesNothing)
{
    Session original = session("original");
    bool fresh = false;
    SessionReport report = connect(original.get(), &fresh);
    ASSERT_EQ(report.status, SessionReport::Status::Ok) << report.message;
    EXPECT_TRUE(fresh);
    EXPECT_EQ(command(admin_, {"GET", kLeaseKey}).str, "original#1");
    ASSERT_EQ(deliver(original.get(), 1).status, SessionReport::Status::Ok);
    std::vector<std::string> before = named_clients();
    ASSERT_FALSE(before.empty()) << "the original's links are fenced (named) once it holds the lease";

    // A connection of this name that the original did not open (a stale one): the clone must not
    // kill it either.
    RedisConnection stale;
    ASSERT_TRUE(connect_url(stale, server_.url()).ok());
    ASSERT_FALSE(command(stale, {"CLIENT", "SETNAME", kClientName}).is_error());

    Session clone = session("clone");
    fresh = false;
    report = connect(clone.get(), &fresh);
    EXPECT_EQ(report.status, SessionReport::Status::Held) << report.message;
    EXPECT_FALSE(fresh);
    EXPECT_FALSE(drain_session_connected(clone.get())) << "a clone that finds the lease held keeps no link";
    EXPECT_NE(std::string(report.message).find("(original)"), std::string::npos) << report.message;
    EXPECT_EQ(command(admin_, {"GET", kLeaseKey}).str, "original#1");

    std::vector<std::string> after = named_clients();
    for (const std::string& id : before)
        EXPECT_NE(std::find(after.begin(), after.end(), id), after.end()) << "the clone fenced the original's " << id;
    EXPECT_EQ(command(stale, {"PING"}).str, "PONG") << "the clone fenced a connection of its name";
    EXPECT_EQ(after.size(), before.size() + 1) << "the clone left a named link";

    // Its keep_lease, not connected, opens no link either.
    EXPECT_NE(drain_session_keep_lease(clone.get(), waiter_).status, SessionReport::Status::Ok);
    EXPECT_EQ(named_clients().size(), after.size());

    // The original goes on: its links live, it delivers and refreshes.
    EXPECT_TRUE(drain_session_connected(original.get()));
    EXPECT_EQ(deliver(original.get(), 2).status, SessionReport::Status::Ok);
    EXPECT_EQ(drain_session_keep_lease(original.get(), waiter_).status, SessionReport::Status::Ok);
    EXPECT_EQ(command(admin_, {"GET", kLeaseKey}).str, "original#2");
    EXPECT_EQ(command(admin_, {"LLEN", "{unit}:jobs"}).integer, 2);
}

TEST_F(ClusterLeaseTest, LeaseOfAStoppedHolderLapsesAfterItsLifetime)
{
    const long timeout_ms = 150;  // lifetime 300 ms
    {
        Session original = session("original", timeout_ms);
        bool fresh = false;
        ASSERT_EQ(connect(original.get(), &fresh).status, SessionReport::Status::Ok);
    }
    Session clone = session("clone", timeout_ms);
    auto since = std::chrono::steady_clock::now();
    SessionReport report;
    bool fresh = false;
    bool asked = false;
    for (int i = 0; i < 100; ++i) {
        report = connect(clone.get(), &fresh);
        // A lapsed lease is taken only once the Postgres side says this start continues its
        // holder (here: yes; the original delivered nothing, so there is no marker).
        ContinuityEvidence evidence{};
        if (report.status == SessionReport::Status::Held &&
            drain_session_continuity_question(clone.get(), &evidence)) {
            asked = true;
            EXPECT_FALSE(evidence.found);
            drain_session_answer_continuity(clone.get(), true);
            report = connect(clone.get(), &fresh);
        }
        if (report.status != SessionReport::Status::Held)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms / 4));
    }
    ASSERT_EQ(report.status, SessionReport::Status::Ok) << report.message;
    EXPECT_TRUE(asked);
    EXPECT_TRUE(fresh);
    EXPECT_GE(elapsed_ms(since), 2 * timeout_ms) << "taken over before the lease's lifetime";
    EXPECT_EQ(command(admin_, {"GET", kLeaseKey}).str, "clone#1");
    bool forced = true;
    std::int64_t highest = -1;
    char from[256];
    ASSERT_TRUE(drain_session_took_over(clone.get(), &forced, &highest, from, sizeof from));
    EXPECT_FALSE(forced);
    EXPECT_STREQ(from, "original");
    EXPECT_EQ(deliver(clone.get(), 1).status, SessionReport::Status::Ok);
}

// A start that does not continue the holder (a clone of a running cluster that fell behind) stays
// held after the lease lapsed, with the same message; jobbuf_take_over() takes it at once, whoever
// holds it, and says which delivery number Redis had reached.
TEST_F(ClusterLeaseTest, LapsedLeaseStaysHeldForAStartThatDoesNotContinueItUntilTakenOver)
{
    const long timeout_ms = 150;
    {
        Session original = session("original start 1", timeout_ms);
        bool fresh = false;
        ASSERT_EQ(connect(original.get(), &fresh).status, SessionReport::Status::Ok);
        ASSERT_EQ(deliver(original.get(), 7).status, SessionReport::Status::Ok);
        ASSERT_EQ(deliver(original.get(), 8).status, SessionReport::Status::Ok);
        EXPECT_EQ(drain_session_unit_number(original.get()), 2);
    }
    Session clone = session("original start 2", timeout_ms);
    drain_session_note_counter(clone.get(), 1);  // copied before the original's last batch
    bool fresh = false;
    int questions = 0;
    for (int i = 0; i < 24; ++i) {
        SessionReport report = connect(clone.get(), &fresh);
        ASSERT_EQ(report.status, SessionReport::Status::Held) << report.message;
        EXPECT_NE(std::string(report.message).find("jobbuf_take_over()"), std::string::npos) << report.message;
        EXPECT_NE(std::string(report.message).find("jobbuf_reset_identity()"), std::string::npos) << report.message;
        ContinuityEvidence evidence{};
        if (drain_session_continuity_question(clone.get(), &evidence)) {
            ++questions;
            EXPECT_TRUE(evidence.found);
            EXPECT_FALSE(evidence.marker.legacy);
            EXPECT_EQ(evidence.marker.number, 2);
            ASSERT_EQ(evidence.marker.count, 1u);
            EXPECT_EQ(evidence.marker.ids[0], 8);
            EXPECT_TRUE(evidence.same_cluster_name);
            drain_session_answer_continuity(clone.get(), false);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms / 4));
    }
    EXPECT_EQ(questions, 1) << "asked once for the lapsed value";
    EXPECT_EQ(command(admin_, {"GET", kLeaseKey}).str.rfind("original start 1#", 0), 0u);

    drain_session_request_take_over(clone.get());
    SessionReport report = connect(clone.get(), &fresh);
    ASSERT_EQ(report.status, SessionReport::Status::Ok) << report.message;
    EXPECT_EQ(command(admin_, {"GET", kLeaseKey}).str, "original start 2#1");
    bool forced = false;
    std::int64_t highest = 0;
    char from[256];
    ASSERT_TRUE(drain_session_took_over(clone.get(), &forced, &highest, from, sizeof from));
    EXPECT_TRUE(forced);
    EXPECT_EQ(highest, 2);
    EXPECT_STREQ(from, "original start 1");
    ASSERT_EQ(deliver(clone.get(), 9).status, SessionReport::Status::Ok);
    EXPECT_EQ(drain_session_unit_number(clone.get()), 3) << "numbers go on above the highest in Redis";
}

// A free lease (the key lost) with the markers kept: a start that did not write them is asked, as
// for a lapsed lease (once for that evidence), and stays held when it does not continue their
// writer; the writer's start takes it again at once. With the markers lost too, the first start to
// look takes it with nothing to prove, and the other then finds it held.
TEST_F(ClusterLeaseTest, FreeLeaseIsTakenOnlyWithTheProofTheMarkersAsk)
{
    Session original = session("original start 1");
    bool fresh = false;
    bool proven = true;
    ASSERT_EQ(connect(original.get(), &fresh).status, SessionReport::Status::Ok);
    ASSERT_TRUE(drain_session_took_free_lease(original.get(), &proven));
    EXPECT_FALSE(proven) << "a fresh installation: nothing to prove";
    ASSERT_EQ(deliver(original.get(), 7).status, SessionReport::Status::Ok);
    ASSERT_EQ(deliver(original.get(), 8).status, SessionReport::Status::Ok);
    ASSERT_EQ(command(admin_, {"DEL", kLeaseKey}).integer, 1);

    Session clone = session("original start 2");
    drain_session_note_counter(clone.get(), 1);  // copied before the original's last batch
    int questions = 0;
    for (int i = 0; i < 4; ++i) {
        SessionReport report = connect(clone.get(), &fresh);
        ASSERT_EQ(report.status, SessionReport::Status::Held) << report.message;
        EXPECT_NE(std::string(report.message).find("(original start 1)"), std::string::npos) << report.message;
        ContinuityEvidence evidence{};
        if (drain_session_continuity_question(clone.get(), &evidence)) {
            ++questions;
            EXPECT_TRUE(evidence.lease_free);
            EXPECT_TRUE(evidence.found);
            EXPECT_EQ(evidence.marker.number, 2);
            EXPECT_EQ(evidence.lease_counter, 0);
            EXPECT_FALSE(evidence.same_cluster_name);
            drain_session_answer_continuity(clone.get(), false);
        }
    }
    EXPECT_EQ(questions, 1) << "asked once for that evidence";
    EXPECT_EQ(command(admin_, {"EXISTS", kLeaseKey}).integer, 0) << "the clone left the free lease alone";
    EXPECT_FALSE(drain_session_took_free_lease(clone.get(), &proven));

    // The original's refresh finds it free: the marker is its own, taken again at once.
    ASSERT_EQ(drain_session_keep_lease(original.get(), waiter_).status, SessionReport::Status::Ok);
    EXPECT_EQ(command(admin_, {"GET", kLeaseKey}).str, "original start 1#1");
    ASSERT_TRUE(drain_session_took_free_lease(original.get(), &proven));
    EXPECT_TRUE(proven);

    // Everything lost: the first start to look takes it; the other is then held.
    ASSERT_FALSE(command(admin_, {"FLUSHALL"}).is_error());
    SessionReport report = connect(clone.get(), &fresh);
    ASSERT_EQ(report.status, SessionReport::Status::Ok) << report.message;
    EXPECT_EQ(command(admin_, {"GET", kLeaseKey}).str, "original start 2#1");
    ASSERT_TRUE(drain_session_took_free_lease(clone.get(), &proven));
    EXPECT_FALSE(proven);
    drain_session_disconnect(original.get());
    report = connect(original.get(), &fresh);
    EXPECT_EQ(report.status, SessionReport::Status::Held) << report.message;
    EXPECT_NE(std::string(report.message).find("(original start 2)"), std::string::npos) << report.message;
}

}  // namespace

// A delivery number is used up only by a unit that ran (a unit Redis refuses whole leaves no gap),
// and the lease carries the holder's committed counter ("<holder>#<n>;<counter>") to a start that
// finds it lapsed: the evidence names it beside the markers' highest number.
TEST_F(ClusterLeaseTest, NumbersWithoutGapsAndTheCounterTheLeaseCarries)
{
    const long timeout_ms = 150;
    {
        Session original = session("original", timeout_ms);
        bool fresh = false;
        ASSERT_EQ(connect(original.get(), &fresh).status, SessionReport::Status::Ok);
        ASSERT_EQ(deliver(original.get(), 1).status, SessionReport::Status::Ok);
        EXPECT_EQ(drain_session_unit_number(original.get()), 1);
        EXPECT_TRUE(drain_session_unit_ran(original.get()));
        ASSERT_FALSE(command(admin_, {"CONFIG", "SET", "maxmemory", "1"}).is_error());
        EXPECT_NE(deliver(original.get(), 2).status, SessionReport::Status::Ok) << "refused whole (OOM)";
        EXPECT_FALSE(drain_session_unit_ran(original.get()));
        EXPECT_NE(deliver(original.get(), 2).status, SessionReport::Status::Ok) << "refused whole again";
        ASSERT_FALSE(command(admin_, {"CONFIG", "SET", "maxmemory", "0"}).is_error());
        bool again = false;
        ASSERT_EQ(connect(original.get(), &again).status, SessionReport::Status::Ok);
        ASSERT_EQ(deliver(original.get(), 2).status, SessionReport::Status::Ok);
        EXPECT_EQ(drain_session_unit_number(original.get()), 2) << "the refused units used no number";
        drain_session_set_lease_counter(original.get(), 2);  // committed (an advance without a batch)
        ASSERT_EQ(drain_session_keep_lease(original.get(), waiter_).status, SessionReport::Status::Ok);
        EXPECT_EQ(command(admin_, {"GET", kLeaseKey}).str, "original#2;2");
    }
    Session clone = session("clone", timeout_ms);
    bool fresh = false;
    bool asked = false;
    for (int i = 0; i < 40 && !asked; ++i) {
        SessionReport report = connect(clone.get(), &fresh);
        ASSERT_EQ(report.status, SessionReport::Status::Held) << report.message;
        EXPECT_NE(std::string(report.message).find("(original)"), std::string::npos) << report.message;
        ContinuityEvidence evidence{};
        if (drain_session_continuity_question(clone.get(), &evidence)) {
            asked = true;
            EXPECT_TRUE(evidence.found);
            EXPECT_EQ(evidence.marker.number, 2);
            EXPECT_EQ(evidence.lease_counter, 2);
            drain_session_answer_continuity(clone.get(), false);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms / 4));
    }
    EXPECT_TRUE(asked);
}
