// Pure C++ regime: delivery acknowledged by replicas (jobbuf.redis_min_replicas): the WAIT sent
// after each unit and marker write, what its reply means, and leaving a server that turned into
// a replica (see session_state.h).
#include "redis/regime.h"

#include <string>

#include "redis/session_state.h"

namespace jobbuf::redis {

// WAIT's own timeout is jobbuf.redis_timeout; the round trip that carries it may wait this much
// longer, so that Redis's answer, not the client's clock, says whether replicas acknowledged.
constexpr long kWaitMarginMs = 1000;

long round_trip_limit(const DrainSession* session)
{
    return session->min_replicas > 0 ? session->timeout_ms * 2 + kWaitMarginMs : session->timeout_ms;
}

// WAIT <min_replicas> <timeout>, sent after the writes it must see acknowledged; none (null)
// without min_replicas.
const CommandPipeline* replica_wait(const DrainSession* session, CommandPipeline* wait)
{
    if (session->min_replicas <= 0)
        return nullptr;
    wait->add({"WAIT", std::to_string(session->min_replicas), std::to_string(session->timeout_ms)});
    return wait;
}

// Takes WAIT's reply (the last one) out of replies: Ok when enough replicas acknowledged `what`.
SessionReport take_replica_wait(const DrainSession* session, std::vector<RedisReply>* replies, const char* what)
{
    if (session->min_replicas <= 0)
        return {};
    RedisReply wait = std::move(replies->back());
    replies->pop_back();
    if (wait.type == RedisReply::Type::Integer && wait.integer >= session->min_replicas)
        return {};
    std::string text = std::string(what) + ": ";
    if (wait.type == RedisReply::Type::Integer)
        text += std::to_string(wait.integer) +
                " of jobbuf.redis_min_replicas = " + std::to_string(session->min_replicas) +
                " replica(s) acknowledged it within " + std::to_string(session->timeout_ms) +
                " ms; its jobs stay staged until a replica has it";
    else
        text += "WAIT failed: " + (wait.is_error() ? wait.str : std::string("unexpected reply"));
    return report_of(SessionReport::Status::Unavailable, text);
}

namespace {

bool says_readonly(const RedisReply& reply)
{
    if (reply.is_error())
        return reply.str.rfind("READONLY", 0) == 0 || reply.str.find("replica instances") != std::string::npos;
    for (const RedisReply& element : reply.elements)
        if (says_readonly(element))
            return true;
    return false;
}

}  // namespace

// A server that answers READONLY is a replica now (a failover demoted it): the connection is
// dropped so that the next connect finds the master again (through the sentinels for a
// Sentinel endpoint).
void leave_a_replica(DrainSession* session, const std::vector<RedisReply>& replies)
{
    for (const RedisReply& reply : replies)
        if (says_readonly(reply)) {
            session->connection.close();
            session->cluster.forget();
            return;
        }
}

}  // namespace jobbuf::redis
