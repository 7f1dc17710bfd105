// Pure C++ regime: the delivery lease (see drain_session.h). Two live PostgreSQL clusters can carry
// one jobbuf installation identity (a pg_basebackup or snapshot clone started beside its
// original, a standby promoted while its primary runs); both would then write one marker and
// fence each other's connections, and each would delete jobs whose ids the other delivered. The
// lease key names the cluster that delivers the installation's jobs to this Redis; a cluster
// takes it only when it is free or already its own, refreshes it while it delivers, and never
// fences, reconciles or pushes while another holds it. It expires twice jobbuf.redis_timeout
// after its holder's last refresh: that is as long as a stopped holder keeps a successor waiting.
#include "redis/regime.h"

#include <string>

#include "redis/session_state.h"

namespace jobbuf::redis {

namespace {

// KEYS[1] the lease, ARGV[1] this cluster's value, ARGV[2] its lifetime in ms. Returns
// {1, ""} when taken now, {2, ""} when refreshed, {0, <holder>} when another holds it.
// (Whole values are compared: the same cluster restarted is the same holder.)
constexpr const char* kTakeLease = "local v = redis.call('GET', KEYS[1]) "
                                   "if v == false or v == ARGV[1] then "
                                   "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) "
                                   "if v == false then return {1, ''} end return {2, ''} end "
                                   "return {0, v}";

}  // namespace

long lease_lifetime_ms(const DrainSession* session)
{
    return 2 * session->timeout_ms;
}

SessionReport take_lease(DrainSession* session, IoWaiter& waiter, bool* taken)
{
    *taken = false;
    // Not on a Redis Cluster yet (docs/cluster.md, limits): its connections are per node.
    if (session->lease_key.empty() || session->is_cluster())
        return {};
    CommandPipeline pipeline;
    pipeline.add({"EVAL", kTakeLease, "1", session->lease_key, session->lease_value,
                  std::to_string(lease_lifetime_ms(session))});
    std::vector<RedisReply> replies;
    RedisStatus status = session->connection.execute(pipeline, &replies, session->timeout_ms, waiter);
    if (!status.ok())
        return report_failure(status, "taking the delivery lease");
    const RedisReply& reply = replies.at(0);
    // Redis wants a password: the fence that follows says so (connection_fence.h).
    if (reply.is_error() && reply.str.rfind("NOAUTH", 0) == 0)
        return {};
    // A Redis user without scripting (NOPERM), or a server without it: delivery goes on as in
    // 1.1, with a warning (as when the fence's CLIENT is refused).
    if (reply.is_error() &&
        (reply.str.rfind("NOPERM", 0) == 0 || reply.str.find("unknown command") != std::string::npos))
        return report_of(SessionReport::Status::Ok,
                         "the delivery lease cannot be taken (EVAL: " + reply.str +
                             "); a clone of this cluster started against this Redis would not be noticed");
    if (reply.is_error())
        return report_of(SessionReport::Status::Refused,
                         "taking the delivery lease " + session->lease_key + ": " + reply.str);
    if (reply.elements.size() != 2)
        return report_of(SessionReport::Status::Refused, "taking the delivery lease: unexpected reply");
    if (reply.elements[0].integer != 0) {
        *taken = reply.elements[0].integer == 1;
        return {};
    }
    session->connection.close();  // nothing more on this connection: no fence, no marker, no push
    return report_of(
        SessionReport::Status::Held,
        "another PostgreSQL cluster with this database's jobbuf installation identity delivers its jobs to "
        "this Redis (" +
            reply.elements[1].str + "); this one (" + session->lease_value +
            ") does not deliver while it does. If this cluster is a copy meant to live on (a pg_basebackup or "
            "snapshot clone, a standby promoted while its primary runs), run SELECT jobbuf_reset_identity() "
            "in this database (the jobs it carries are then held), otherwise stop it");
}

bool drain_session_set_lease(DrainSession* session, const char* lease_key, const char* lease_value) noexcept
{
    try {
        if (session->lease_key == lease_key && session->lease_value == lease_value)
            return false;
        session->lease_key = lease_key;
        session->lease_value = lease_value;
        session->connection.close();  // the next connection takes the new lease first
        return true;
    } catch (...) {
        session->connection.close();
        return true;
    }
}

SessionReport drain_session_keep_lease(DrainSession* session, IoWaiter& waiter) noexcept
{
    try {
        bool taken = false;
        return take_lease(session, waiter, &taken);
    } catch (...) {
        session->connection.close();
        return out_of_memory();
    }
}

}  // namespace jobbuf::redis
