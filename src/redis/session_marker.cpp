// Pure C++ regime: the drain session's delivery marker: read (and, with min_replicas, confirmed
// on replicas before it is trusted) and rewritten (see drain_session.h and session_state.h).
#include "redis/regime.h"

#include <string>

#include "redis/session_state.h"

namespace jobbuf::redis {

namespace {

// SET <marker> value, followed by WAIT when replicas must acknowledge it (hash_slot: the marker of
// that hash slot on a cluster, -1 otherwise).
SessionReport set_marker(DrainSession* session, IoWaiter& waiter, int hash_slot, const std::string& value,
                         const char* doing)
{
    CommandPipeline pipeline;
    pipeline.add({"SET", marker_key_of(session, hash_slot), value});
    CommandPipeline wait;
    std::vector<RedisReply> replies;
    RedisStatus status = session_round_trip(session, hash_slot, pipeline, &replies, round_trip_limit(session), waiter,
                                            replica_wait(session, &wait));
    if (!status.ok())
        return report_failure(status, doing);
    leave_a_replica(session, replies);
    SessionReport acknowledged = take_replica_wait(session, &replies, doing);
    if (replies.at(0).is_error())
        return report_of(SessionReport::Status::Refused, std::string(doing) + ": " + replies[0].str);
    return acknowledged;
}

// With min_replicas: the marker read from the master counts only once that many replicas have
// it. WAIT covers every write before this connection's last one, and a connection that wrote
// nothing yet has nothing to wait for: the marker is written again (same value), then WAIT.
SessionReport confirm_on_replicas(DrainSession* session, IoWaiter& waiter, int hash_slot, const std::string& value)
{
    if (session->min_replicas <= 0)
        return {};
    return set_marker(session, waiter, hash_slot, value, "confirming the delivery marker on replicas");
}

// Reads one marker (of hash_slot on a cluster, -1 otherwise) and appends it to session->markers.
SessionReport read_marker(DrainSession* session, IoWaiter& waiter, int hash_slot, bool confirm)
{
    const std::string key = marker_key_of(session, hash_slot);
    CommandPipeline pipeline;
    pipeline.add({"GET", key});
    std::vector<RedisReply> replies;
    RedisStatus status = session_round_trip(session, hash_slot, pipeline, &replies, session->timeout_ms, waiter);
    if (!status.ok())
        return report_failure(status, "reading the delivery marker");
    const RedisReply& reply = replies.at(0);
    if (reply.type == RedisReply::Type::String) {
        MarkerValue value;
        if (!parse_marker_value(reply.str, &value))
            return report_of(SessionReport::Status::Refused, "the delivery marker " + key + " is malformed");
        if (!value.ids.empty() && confirm) {
            SessionReport confirmed = confirm_on_replicas(session, waiter, hash_slot, reply.str);
            if (confirmed.status != SessionReport::Status::Ok)
                return confirmed;
        }
        session->markers.push_back(std::move(value));
    } else if (reply.type != RedisReply::Type::Nil) {
        return report_of(SessionReport::Status::Refused,
                         "reading the delivery marker " + key + ": " +
                             (reply.is_error() ? reply.str : std::string("not a string")));
    }
    return {};
}

}  // namespace

SessionReport read_markers(DrainSession* session, IoWaiter& waiter, bool confirm)
{
    session->markers.clear();
    session->marker_views.clear();
    std::vector<int> hash_slots{-1};
    if (session->is_cluster()) {
        SessionReport found = cluster_marker_hash_slots(session, waiter, &hash_slots);
        if (found.status != SessionReport::Status::Ok)
            return found;
    }
    for (int hash_slot : hash_slots) {
        SessionReport read = read_marker(session, waiter, hash_slot, confirm);
        if (read.status != SessionReport::Status::Ok)
            return read;
    }
    for (const MarkerValue& m : session->markers) {
        session->marker_views.push_back(MarkerView{m.ids.data(), m.ids.size(), m.number, m.digest, m.legacy,
                                                   !m.legacy && m.writer == session->lease_value});
        if (!m.legacy && m.number > session->counter)
            session->counter = m.number;
    }
    return {};
}

SessionReport drain_session_read_marker(DrainSession* session, IoWaiter& waiter, const MarkerView** markers,
                                        std::size_t* count) noexcept
{
    try {
        SessionReport read = read_markers(session, waiter, true);
        if (read.status != SessionReport::Status::Ok)
            return read;
        *markers = session->marker_views.data();
        *count = session->marker_views.size();
        return {};
    } catch (...) {
        session->connection.close();
        return out_of_memory();
    }
}

SessionReport drain_session_write_marker(DrainSession* session, IoWaiter& waiter, const std::int64_t* ids,
                                         const double* staged_at, std::size_t count) noexcept
{
    try {
        std::string value = format_marker_value(session->last_unit_number, marker_digest(ids, staged_at, count),
                                                std::vector<std::int64_t>(ids, ids + count), session->lease_value);
        return set_marker(session, waiter, session->is_cluster() ? session->last_hash_slot : -1, value,
                          "rewriting the delivery marker");
    } catch (...) {
        session->connection.close();
        return out_of_memory();
    }
}

std::int64_t drain_session_unit_number(const DrainSession* session) noexcept
{
    return session->last_unit_number;
}

std::int64_t drain_session_counter(const DrainSession* session) noexcept
{
    return session->counter;
}

bool drain_session_unit_ran(const DrainSession* session) noexcept
{
    return session->last_unit_ran;
}

void drain_session_note_counter(DrainSession* session, std::int64_t committed) noexcept
{
    if (committed > session->counter)
        session->counter = committed;
}

void drain_session_reset_counter(DrainSession* session, std::int64_t committed) noexcept
{
    session->counter = committed;
    session->lease_counter = committed;
    session->last_unit_ran = false;
}

void drain_session_set_lease_counter(DrainSession* session, std::int64_t committed) noexcept
{
    if (committed > session->lease_counter)
        session->lease_counter = committed;
    drain_session_note_counter(session, committed);
}

bool drain_session_on_cluster(const DrainSession* session) noexcept
{
    return session->is_cluster();
}

SessionReport drain_session_delete_marker(DrainSession* session, IoWaiter& waiter) noexcept
{
    try {
        CommandPipeline pipeline;
        pipeline.add({"DEL", session->marker_key});
        std::vector<RedisReply> replies;
        RedisStatus status = session->connection.execute(pipeline, &replies, session->timeout_ms, waiter);
        if (!status.ok())
            return report_failure(status, "deleting an earlier version's delivery marker");
        if (replies.at(0).is_error())
            return report_of(SessionReport::Status::Refused,
                             "deleting the delivery marker " + session->marker_key + ": " + replies[0].str);
        return {};
    } catch (...) {
        session->connection.close();
        return out_of_memory();
    }
}

}  // namespace jobbuf::redis
