// Pure C++ regime: the delivery lease (see drain_session.h). Two live PostgreSQL clusters can carry
// one jobbuf installation identity (a pg_basebackup or snapshot clone started beside its
// original, a standby promoted while its primary runs); both would then write one marker and
// fence each other's connections, and each would delete jobs whose ids the other delivered. The
// lease key names the cluster that delivers the installation's jobs to this Redis; a cluster
// takes it only when it is free or already its own, refreshes it while it delivers, and never
// fences, reconciles or pushes while another holds it.
// The lease has no TTL in Redis: it lapses only while Redis is reachable. Its value is the
// holder's name, a refresh count and the holder's committed delivery counter
// ("<holder>#<n>;<counter>"; "<holder>#<n>" before the holder has one to carry); the holder
// advances that counter at least once per lifetime even without batches, so a copy that keeps
// the counter it was copied with falls behind an idle original too (delivery_counter.h). Another cluster takes it over only after it
// has found it unchanged, with no gap longer than half the lifetime between two looks (a gap is
// Redis, or this session, away), for the whole lifetime (twice jobbuf.redis_timeout). So a Redis
// outage of any length never hands the lease on (a TTL ran out during the outage, and whoever
// reconnected first took it); the holder, which retries at least every half lifetime while it
// holds the lease (drain_worker.cpp), refreshes it first after the outage. A stopped holder keeps a
// successor waiting one lifetime of Redis being reachable.
// A free lease (the key absent: a Redis restarted without persistence, FLUSHDB, a 1.2 lease whose
// TTL ran out) is taken at once only when Redis holds no evidence of an earlier holder: no marker
// with a delivery number, or only this start's own. Otherwise the same continuity test as for a
// lapsed lease applies (a clone that reconnects first after the key was lost stays held). With
// nothing left at all (markers lost too), the first start to look takes it: no evidence is left
// to tell a later start from a copy, and a copy beside it then finds it held.
// On a Redis Cluster the lease key lives in its own hash slot (CRC16 of the key), on the master
// that serves it (the round trip follows MOVED and ASK, cluster/cluster_links.h). Connecting asks
// for the slot map and takes the lease over links not yet fenced, and fences them only once the
// lease is taken (cluster_session.cpp); a cluster that finds it held forgets every link and the
// map, so it is not connected and has fenced, read and pushed nothing on any node.
#include "redis/regime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "redis/cluster/slot_hash.h"
#include "redis/session_state.h"

namespace jobbuf::redis {

namespace {

// KEYS[1] the lease, ARGV[1] this start's name, ARGV[2] the value this session saw lapse ("":
// none), ARGV[3] "1" to take it from any holder (jobbuf_take_over()), ARGV[4] the suffix carrying
// this start's committed delivery counter (";<counter>", or ""), ARGV[5] "1" when a free lease
// may be taken. Returns {1, ''} when taken (free), {5, ''} when free and not to be taken yet,
// {2, ''} when refreshed, {3, <old>} when taken over after it lapsed, {4, <old>} when taken from a
// holder by request, {0, <value>} when another holds it. A 1.2 value (no "#<n>", a TTL) counts as
// refresh 0 of its holder; SET drops its TTL.
constexpr const char* kTakeLease =
    "local v = redis.call('GET', KEYS[1]) "
    "if v == false then "
    "  if ARGV[5] ~= '1' then return {5, ''} end "
    "  redis.call('SET', KEYS[1], ARGV[1] .. '#1' .. ARGV[4]) return {1, ''} end "
    "local holder, n = string.match(v, '^(.*)#(%d+);%d+$') "
    "if holder == nil then holder, n = string.match(v, '^(.*)#(%d+)$') end "
    "if holder == nil then holder = v n = '0' end "
    "if holder == ARGV[1] then redis.call('SET', KEYS[1], ARGV[1] .. '#' .. (tonumber(n) + 1) .. ARGV[4]) return {2, ''} end "
    "if ARGV[2] ~= '' and v == ARGV[2] then redis.call('SET', KEYS[1], ARGV[1] .. '#1' .. ARGV[4]) return {3, v} end "
    "if ARGV[3] == '1' then redis.call('SET', KEYS[1], ARGV[1] .. '#1' .. ARGV[4]) return {4, v} end "
    "return {0, v}";

using Clock = std::chrono::steady_clock;

bool all_digits(const std::string& text, std::size_t from, std::size_t to)
{
    if (from >= to)
        return false;
    for (std::size_t i = from; i < to; i++)
        if (text[i] < '0' || text[i] > '9')
            return false;
    return true;
}

// Splits a lease value into its holder and the counter it carries (0: none, a 1.2 value, or one
// written before the holder had a counter to carry).
std::string split_lease(const std::string& value, std::int64_t* counter)
{
    *counter = 0;
    std::size_t hash = value.rfind('#');
    if (hash == std::string::npos)
        return value;
    std::size_t semi = value.find(';', hash);
    std::size_t end = semi == std::string::npos ? value.size() : semi;
    if (!all_digits(value, hash + 1, end))
        return value;
    if (semi != std::string::npos) {
        if (!all_digits(value, semi + 1, value.size()) || value.size() - semi - 1 > 18)
            return value;
        *counter = std::stoll(value.substr(semi + 1));
    }
    return value.substr(0, hash);
}

// The holder named in a lease value (without its refresh count and counter).
std::string holder_of(const std::string& value)
{
    std::int64_t counter = 0;
    return split_lease(value, &counter);
}

std::int64_t counter_of(const std::string& value)
{
    std::int64_t counter = 0;
    split_lease(value, &counter);
    return counter;
}

// The value to take over: the one this session has seen unchanged, without a gap, for the
// lease's lifetime; "" when there is none.
std::string lapsed_value(const DrainSession* session, Clock::time_point now)
{
    if (session->observed_lease.empty())
        return "";
    std::chrono::milliseconds lifetime(lease_lifetime_ms(session));
    bool unbroken = now - session->observed_last <= lifetime / 2;
    return unbroken && now - session->observed_since >= lifetime ? session->observed_lease : "";
}

// Notes another holder's lease as found now: a new value, or the same after a gap, starts again.
void observe(DrainSession* session, const std::string& value, Clock::time_point now)
{
    std::chrono::milliseconds lifetime(lease_lifetime_ms(session));
    if (value != session->observed_lease || now - session->observed_last > lifetime / 2) {
        session->observed_lease = value;
        session->observed_since = now;
    }
    session->observed_last = now;
}

// A name without its start (" start <time>"): how 1.2 named a holder.
std::string without_start(const std::string& name)
{
    std::size_t at = name.rfind(" start ");
    return at == std::string::npos ? name : name.substr(0, at);
}

// The marker with the highest delivery number among those read (a legacy one when there is no
// other), or null when there is none.
const MarkerView* highest_marker(const DrainSession* session)
{
    const MarkerView* best = nullptr;
    for (const MarkerView& m : session->marker_views)
        if (best == nullptr || (best->legacy && !m.legacy) || (!m.legacy && m.number > best->number))
            best = &m;
    return best;
}

// The evidence of an earlier holder of a free lease, from the markers just read: the highest
// numbered marker's number, digest and writer ("" when there is none: no marker, or only 1.2 ones,
// which carry no number). *writer names its writer, *own whether this start wrote it.
std::string free_lease_evidence(const DrainSession* session, std::string* writer, bool* own)
{
    const MarkerValue* best = nullptr;
    for (const MarkerValue& m : session->markers)
        if (!m.legacy && (best == nullptr || m.number > best->number))
            best = &m;
    *own = best != nullptr && best->writer == session->lease_value;
    *writer = best != nullptr ? best->writer : "";
    return best == nullptr ? ""
                           : "free;" + std::to_string(best->number) + ";" + std::to_string(best->digest) + ";" +
                                 best->writer;
}

std::string held_message(const DrainSession* session, const std::string& value)
{
    return "another PostgreSQL cluster with this database's jobbuf installation identity delivers its jobs to "
           "this Redis (" +
           holder_of(value) + "); this one (" + session->lease_value +
           ") does not deliver while it does, and takes the lease only as a later start of that cluster. On a copy "
           "meant to live on (a pg_basebackup or snapshot clone, a standby promoted while its primary runs), run "
           "SELECT jobbuf_reset_identity() (the jobs it carries are then held); on the cluster that is to deliver, "
           "once the other is stopped, run SELECT jobbuf_take_over()";
}

}  // namespace

long lease_lifetime_ms(const DrainSession* session)
{
    return 2 * session->timeout_ms;
}

SessionReport take_lease(DrainSession* session, IoWaiter& waiter, bool* taken)
{
    *taken = false;
    if (session->lease_key.empty())
        return {};
    // On a cluster, only over links opened by cluster_connect: a round trip without a slot map
    // would open fenced links before the lease is known to be this cluster's.
    if (session->is_cluster() && !session->cluster.map.known())
        return report_of(SessionReport::Status::Unavailable,
                         "taking the delivery lease: not connected to the Redis Cluster");
    Clock::time_point now = Clock::now();
    std::string lapsed = lapsed_value(session, now);
    const bool force = session->take_over;
    // A lapsed lease, or one to take by request: first the markers in Redis, the evidence of which
    // start wrote last and with which delivery number (nothing is written before the lease is
    // taken). A lapsed lease waits for the Postgres side's verdict: does this start continue its
    // holder?
    if (!lapsed.empty() && !force && session->continuity_for != lapsed) {
        session->continuity = DrainSession::Continuity::Unknown;
        session->continuity_for = lapsed;
        session->continuity_free = false;
    }
    if (force || (!lapsed.empty() && session->continuity == DrainSession::Continuity::Unknown)) {
        SessionReport read = read_markers(session, waiter, false);
        if (read.status != SessionReport::Status::Ok)
            return read;
        if (!force) {
            session->continuity = DrainSession::Continuity::Asked;
            session->connection.close();
            session->cluster.forget();
            return report_of(SessionReport::Status::Held, held_message(session, lapsed));
        }
    }
    if (force || session->continuity_free || session->continuity != DrainSession::Continuity::Proven)
        lapsed.clear();
    std::string carried = session->lease_counter > 0 ? ";" + std::to_string(session->lease_counter) : "";
    int hash_slot = session->is_cluster() ? key_slot(session->lease_key) : -1;
    std::vector<RedisReply> replies;
    bool free_proven = false;
    // At most twice: a free lease found without permission to take it is taken on the second
    // round trip once the markers show no earlier holder, or one this start continues.
    for (bool may_take_free = force;; may_take_free = true) {
        CommandPipeline pipeline;
        pipeline.add({"EVAL", kTakeLease, "1", session->lease_key, session->lease_value, lapsed, force ? "1" : "",
                      carried, may_take_free ? "1" : ""});
        replies.clear();
        RedisStatus status =
            session_round_trip(session, hash_slot, pipeline, &replies, session->timeout_ms, waiter);
        if (!status.ok())
            return report_failure(status, "taking the delivery lease");
        const RedisReply& found = replies.at(0);
        if (may_take_free || found.is_error() || found.elements.size() != 2 || found.elements[0].integer != 5)
            break;
        // Free: the markers (nothing is written before the lease is taken) say whether a start
        // delivered before. None with a number, or this start's own: taken at once.
        SessionReport read = read_markers(session, waiter, false);
        if (read.status != SessionReport::Status::Ok)
            return read;
        std::string writer;
        bool own = false;
        std::string evidence = free_lease_evidence(session, &writer, &own);
        free_proven = !evidence.empty();
        if (evidence.empty() || own)
            continue;
        if (session->continuity_for != evidence) {
            session->continuity = DrainSession::Continuity::Unknown;
            session->continuity_for = evidence;
            session->continuity_free = true;
        }
        if (session->continuity == DrainSession::Continuity::Proven)
            continue;
        // Asked once per evidence; refuted, held with the message a lease of that writer gives.
        if (session->continuity != DrainSession::Continuity::Refuted)
            session->continuity = DrainSession::Continuity::Asked;
        session->observed_lease.clear();
        session->connection.close();
        session->cluster.forget();
        return report_of(SessionReport::Status::Held, held_message(session, writer));
    }
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
    long long code = reply.elements[0].integer;
    if (code != 0) {
        *taken = code != 2;
        if (code == 1) {
            session->took_free = true;
            session->took_free_proven = free_proven;
        }
        if (code == 3 || code == 4) {
            session->took_over = true;
            session->took_over_forced = code == 4;
            session->taken_from = holder_of(reply.elements[1].str);
            session->taken_counter = counter_of(reply.elements[1].str);
        }
        session->take_over = false;
        session->continuity = DrainSession::Continuity::Unknown;
        session->continuity_for.clear();
        session->continuity_free = false;
        session->observed_lease.clear();
        return {};
    }
    observe(session, reply.elements[1].str, now);
    // Nothing more on this connection, or on any link to a cluster's nodes (not connected any
    // more): no fence, no marker, no push.
    session->connection.close();
    session->cluster.forget();
    return report_of(SessionReport::Status::Held, held_message(session, reply.elements[1].str));
}

bool drain_session_set_lease(DrainSession* session, const char* lease_key, const char* lease_value) noexcept
{
    try {
        if (session->lease_key == lease_key && session->lease_value == lease_value)
            return false;
        session->lease_key = lease_key;
        session->lease_value = lease_value;
        session->connection.close();  // the next connection takes the new lease first
        session->cluster.forget();
        return true;
    } catch (...) {
        session->connection.close();
        session->cluster.forget();
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
        session->cluster.forget();
        return out_of_memory();
    }
}

void drain_session_request_take_over(DrainSession* session) noexcept
{
    session->take_over = true;
    session->connection.close();  // the next connection takes the lease
    session->cluster.forget();
}

bool drain_session_continuity_question(const DrainSession* session, ContinuityEvidence* evidence) noexcept
{
    try {
        if (session->continuity != DrainSession::Continuity::Asked)
            return false;
        const MarkerView* best = highest_marker(session);
        evidence->found = best != nullptr;
        evidence->marker = best != nullptr ? *best : MarkerView{nullptr, 0, 0, 0, false, false};
        evidence->lease_free = session->continuity_free;
        evidence->lease_counter = session->continuity_free ? 0 : counter_of(session->continuity_for);
        evidence->same_cluster_name =
            !session->continuity_free &&
            without_start(holder_of(session->continuity_for)) == without_start(session->lease_value);
        return true;
    } catch (...) {
        return false;
    }
}

void drain_session_answer_continuity(DrainSession* session, bool continues) noexcept
{
    if (session->continuity == DrainSession::Continuity::Asked)
        session->continuity = continues ? DrainSession::Continuity::Proven : DrainSession::Continuity::Refuted;
}

bool drain_session_took_free_lease(DrainSession* session, bool* proven) noexcept
{
    if (!session->took_free)
        return false;
    session->took_free = false;
    *proven = session->took_free_proven;
    return true;
}

bool drain_session_took_over(DrainSession* session, bool* forced, std::int64_t* highest, char* from,
                             std::size_t from_len) noexcept
{
    if (!session->took_over)
        return false;
    session->took_over = false;
    *forced = session->took_over_forced;
    const MarkerView* best = highest_marker(session);
    *highest = best != nullptr && !best->legacy ? best->number : 0;
    *highest = std::max(*highest, session->taken_counter);
    std::snprintf(from, from_len, "%s", session->taken_from.c_str());
    return true;
}

}  // namespace jobbuf::redis
