// Pure C++ regime: DrainSession, the worker's Redis connection and batch delivery behind a
// noexcept, plain-data interface (see drain_session.h); the marker is in session_marker.cpp and
// replica acknowledgements in replica_ack.cpp.
#include "redis/regime.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>

#include "redis/connection.h"
#include "redis/connection_fence.h"
#include "redis/delivery.h"
#include "redis/drain_session.h"
#include "redis/endpoint.h"
#include "redis/session_state.h"

namespace jobbuf::redis {

// The session itself, and the helpers its files share: session_state.h.

SessionReport report_of(SessionReport::Status status, const std::string& text)
{
    SessionReport report;
    report.status = status;
    std::snprintf(report.message, sizeof(report.message), "%s", text.c_str());
    return report;
}

// Maps a failed round trip to a report; the connection is already closed by RedisConnection.
SessionReport report_failure(const RedisStatus& status, const char* doing)
{
    auto kind = status.code == RedisStatus::Code::Interrupted ? SessionReport::Status::Interrupted
                                                              : SessionReport::Status::Unavailable;
    return report_of(kind, std::string(doing) + ": " + status.message);
}

SessionReport out_of_memory()
{
    return report_of(SessionReport::Status::Unavailable, "out of memory in the Redis client");
}

namespace {

// Reads proto-max-bulk-len; Redis's default when CONFIG is refused (ACL, renamed command).
RedisStatus read_max_bulk_bytes(DrainSession* session, IoWaiter& waiter)
{
    CommandPipeline pipeline;
    pipeline.add({"CONFIG", "GET", "proto-max-bulk-len"});
    std::vector<RedisReply> replies;
    RedisStatus status = session_round_trip(session, -1, pipeline, &replies, session->timeout_ms, waiter);
    if (!status.ok())
        return status;
    std::size_t configured = kDefaultMaxBulkBytes;
    const RedisReply& reply = replies.at(0);
    if (reply.type == RedisReply::Type::Array && reply.elements.size() == 2 &&
        reply.elements[1].type == RedisReply::Type::String) {
        const std::string& text = reply.elements[1].str;
        unsigned long long value = 0;
        auto res = std::from_chars(text.data(), text.data() + text.size(), value);
        if (res.ec == std::errc() && res.ptr == text.data() + text.size() && value > 0)
            configured = static_cast<std::size_t>(value);
    }
    session->max_bulk_bytes = std::min(configured, session->refused_bulk_bytes);
    return status;
}

// Redis's smallest allowed proto-max-bulk-len: a protocol error for a unit whose payloads are all
// smaller is not about their size.
constexpr std::size_t kMinMaxBulkBytes = 1024 * 1024;

}  // namespace

DrainSession* drain_session_create() noexcept
{
    try {
        return new DrainSession();
    } catch (...) {
        return nullptr;
    }
}

void drain_session_destroy(DrainSession* session) noexcept
{
    delete session;
}

SessionReport drain_session_configure(DrainSession* session, const SessionSettings& settings) noexcept
{
    try {
        session->timeout_ms = settings.timeout_ms;
        session->client_name = settings.client_name;
        session->min_replicas = settings.min_replicas;
        session->require_noeviction = settings.require_noeviction;
        std::string limit_error;
        if (!parse_memory_limit(settings.memory_limit != nullptr ? settings.memory_limit : "", &session->memory_limit,
                                &limit_error))
            return report_of(SessionReport::Status::BadConfig, "jobbuf.redis_memory_limit: " + limit_error);
        session->cluster.client_name = session->client_name;  // the links opened from now on carry it
        std::string effective = std::string(settings.redis_url) + '\n' + (settings.password ? settings.password : "") +
                                '\n' + (settings.sentinel_password ? settings.sentinel_password : "") + '\n' +
                                std::to_string(settings.tls_verify) + '\n' + settings.tls_ca_file + '\n' +
                                settings.tls_cert_file + '\n' + settings.tls_key_file;
        if (session->configured && session->url == effective)
            return {};
        RedisEndpoint endpoint;
        std::string error;
        if (!parse_redis_url(settings.redis_url, &endpoint, &error)) {
            session->configured = false;
            session->connection.close();
            return report_of(SessionReport::Status::BadConfig, "jobbuf.redis_url: " + error);
        }
        if (settings.password != nullptr)
            endpoint.password = settings.password;
        if (!endpoint.user.empty() && endpoint.password.empty()) {
            session->configured = false;
            session->connection.close();
            return report_of(SessionReport::Status::BadConfig,
                             "jobbuf.redis_url names a Redis user without a password: set jobbuf.redis_password_file "
                             "(for the server, or for the database with ALTER DATABASE ... SET)");
        }
        endpoint.tls_options.verify = static_cast<TlsOptions::Verify>(settings.tls_verify);
        endpoint.tls_options.ca_file = settings.tls_ca_file;
        endpoint.tls_options.cert_file = settings.tls_cert_file;
        endpoint.tls_options.key_file = settings.tls_key_file;
        session->connection.close();
        session->refused_bulk_bytes = kDefaultMaxBulkBytes;  // another server: learn again
        session->endpoint = endpoint;
        session->sentinel_password = settings.sentinel_password ? settings.sentinel_password : "";
        session->sentinels = SentinelCursor();
        session->cluster.forget();
        session->cluster.node_template = endpoint;
        session->cluster.node_template.kind = RedisEndpoint::Kind::Tcp;
        session->cluster.seeds = endpoint.seeds;
        session->cluster.client_name = session->client_name;
        session->marker_hash_slots.clear();
        session->markers_scanned = false;
        session->url = effective;
        session->configured = true;
        return {};
    } catch (...) {
        return out_of_memory();
    }
}

SessionReport drain_session_connect(DrainSession* session, IoWaiter& waiter, bool* fresh) noexcept
{
    *fresh = false;
    if (!session->configured)
        return report_of(SessionReport::Status::BadConfig,
                         "the Redis settings are not valid (jobbuf.redis_url or jobbuf.redis_password_file)");
    if (drain_session_connected(session))
        return {};
    forget_memory_readings(session);  // a new connection may reach another master: read it first
    try {
        if (session->is_cluster()) {
            SessionReport report = cluster_connect(session, waiter, fresh);
            if (report.status != SessionReport::Status::Ok || !*fresh)
                return report;
            RedisStatus status = read_max_bulk_bytes(session, waiter);
            if (!status.ok()) {
                *fresh = false;
                return report_failure(status, "reading proto-max-bulk-len");
            }
            return report;
        }
        RedisStatus status = connect_to_master(session->connection, session->endpoint, session->sentinel_password,
                                               session->timeout_ms, waiter, &session->sentinels);
        if (!status.ok()) {
            auto kind = status.code == RedisStatus::Code::Interrupted ? SessionReport::Status::Interrupted
                                                                      : SessionReport::Status::Unavailable;
            return report_of(kind, status.message);
        }
        bool taken = false;
        SessionReport lease = take_lease(session, waiter, &taken);
        if (lease.status != SessionReport::Status::Ok)
            return lease;
        std::string warning = lease.message;  // a lease that cannot be taken at all: a warning
        std::string fence_warning;
        status = fence_previous_connections(session->connection, session->client_name, session->timeout_ms, waiter,
                                            &fence_warning);
        if (!fence_warning.empty())
            warning = warning.empty() ? fence_warning : warning + "; " + fence_warning;
        if (!status.ok()) {
            session->connection.close();  // Redis may refuse every command (NOAUTH): not connected
            auto kind = status.code == RedisStatus::Code::Interrupted ? SessionReport::Status::Interrupted
                                                                      : SessionReport::Status::Unavailable;
            if (status.code == RedisStatus::Code::AuthFailed)
                return report_of(kind, "Redis at " + session->endpoint.redacted() + " " + status.message);
            return report_of(kind, "fencing earlier connections: " + status.message);
        }
        status = read_max_bulk_bytes(session, waiter);
        if (!status.ok())
            return report_failure(status, "reading proto-max-bulk-len");
        *fresh = true;
        return report_of(SessionReport::Status::Ok, warning);  // with a warning when fencing is unavailable
    } catch (...) {
        session->connection.close();
        return out_of_memory();
    }
}

bool drain_session_set_marker_key(DrainSession* session, const char* marker_key) noexcept
{
    try {
        if (session->marker_key == marker_key)
            return false;
        session->marker_key = marker_key;
        session->marker_hash_slots.clear();  // another installation: its markers are looked for again
        session->markers_scanned = false;
        return true;
    } catch (...) {
        session->connection.close();
        return true;
    }
}

std::size_t drain_session_max_bulk_bytes(const DrainSession* session) noexcept
{
    return session->max_bulk_bytes;
}

bool drain_session_connected(const DrainSession* session) noexcept
{
    return session->is_cluster() ? session->cluster.map.known() : session->connection.connected();
}

int drain_session_socket(const DrainSession* session) noexcept
{
    return session->connection.fd();
}

bool drain_session_check_open(DrainSession* session) noexcept
{
    return session->connection.still_open();
}

void drain_session_disconnect(DrainSession* session) noexcept
{
    session->connection.close();
    session->cluster.forget();
}

void drain_session_unconfigure(DrainSession* session) noexcept
{
    session->connection.close();
    session->cluster.forget();
    session->configured = false;
    session->url.clear();
}

void drain_session_describe(const DrainSession* session, char* out, std::size_t out_len) noexcept
{
    try {
        std::string text = session->configured ? session->endpoint.redacted() : "(invalid jobbuf.redis_url)";
        if (session->configured && !session->sentinels.master.empty())
            text += " (master " + session->sentinels.master + ")";
        if (session->configured && session->is_cluster() && session->cluster.map.known()) {
            std::size_t masters = 0;
            for (const ClusterNode& node : session->cluster.map.nodes)
                masters += node.master ? 1 : 0;
            text += " (" + std::to_string(masters) + " masters)";
        }
        std::snprintf(out, out_len, "%s", text.c_str());
    } catch (...) {
        std::snprintf(out, out_len, "(redis)");
    }
}

SessionReport drain_session_deliver(DrainSession* session, IoWaiter& waiter, const QueueTarget* target,
                                    const StagedJob* jobs, std::size_t count, double now_epoch, JobResult* results,
                                    char* reject_message, std::size_t reject_len) noexcept
{
    try {
        std::vector<StagedJob> batch_jobs(jobs, jobs + count);
        DeliveryPlan plan;
        std::string error;
        // On a cluster, the unit goes to the hash slot of the queue's keys, with that hash slot's
        // marker.
        int hash_slot = -1;
        if (session->is_cluster()) {
            hash_slot = target_hash_slot(*target, &error);
            if (hash_slot < 0)
                return report_of(SessionReport::Status::Refused, error);
            session->marker_hash_slots.insert(hash_slot);  // before sending: a unit in doubt is read back
            session->last_hash_slot = hash_slot;
        }
        // The unit's delivery number: one above every number this session knows used (pushed by a
        // unit that ran, read from a marker, committed). A number is used up only when the EXEC
        // reply shows that the unit ran: a unit refused as a whole (OOM, EXECABORT) leaves no gap
        // between the committed counter and the markers, which a later start must close to prove
        // that it continues this one (docs/copies.md). A unit in doubt (the connection lost, a
        // timeout) is settled by the marker read at reconciliation, which raises the counter when
        // it ran.
        MarkerStamp stamp;
        stamp.number = session->counter + 1;
        stamp.writer = session->lease_value;
        session->last_unit_ran = false;
        if (!plan_delivery(*target, batch_jobs, marker_key_of(session, hash_slot), now_epoch, &plan, &error,
                           session->max_bulk_bytes, &stamp))
            return report_of(SessionReport::Status::Unavailable, error);
        session->last_unit_number = stamp.number;

        CommandPipeline wait;
        std::vector<RedisReply> replies;
        RedisStatus status = session_round_trip(session, hash_slot, plan.unit, &replies, round_trip_limit(session),
                                                waiter, replica_wait(session, &wait));
        if (status.ok() && replies.size() >= plan.unit.command_count() && plan.unit.command_count() > 0 &&
            replies[plan.unit.command_count() - 1].type == RedisReply::Type::Array) {
            session->last_unit_ran = true;  // EXEC ran the unit (its marker is in Redis)
            session->counter = std::max(session->counter, stamp.number);
        }
        if (status.code == RedisStatus::Code::RequestRefused) {
            std::size_t largest = 0;
            for (const StagedJob& job : batch_jobs)
                largest = std::max(largest, job.payload.size());
            if (largest > kMinMaxBulkBytes) {
                session->refused_bulk_bytes = std::min(session->refused_bulk_bytes, largest - 1);
                session->max_bulk_bytes = std::min(session->max_bulk_bytes, session->refused_bulk_bytes);
                return report_of(SessionReport::Status::Refused, "pushing a batch: " + status.message +
                                                                     "; its largest job (" + std::to_string(largest) +
                                                                     " bytes) will not be sent again");
            }
        }
        if (!status.ok())
            return report_failure(status, "pushing a batch");
        leave_a_replica(session, replies);
        SessionReport acknowledged = take_replica_wait(session, &replies, "pushing a batch");
        if (acknowledged.status != SessionReport::Status::Ok)
            return acknowledged;

        session->last_outcomes.clear();
        std::vector<JobOutcome>& outcomes = session->last_outcomes;
        if (!read_delivery(plan, replies, count, &outcomes, &error))
            return report_of(SessionReport::Status::Refused, error);

        reject_message[0] = '\0';
        for (std::size_t i = 0; i < count; i++) {
            results[i] = outcomes[i].result;
            bool failed = results[i] == JobResult::Rejected || results[i] == JobResult::TooLarge;
            if (failed && reject_message[0] == '\0')
                std::snprintf(reject_message, reject_len, "%s", outcomes[i].error.c_str());
        }
        return {};
    } catch (...) {
        session->connection.close();
        return out_of_memory();
    }
}

bool drain_session_refuses_target(const DrainSession* session, const QueueTarget* target, char* why,
                                  std::size_t why_len) noexcept
{
    try {
        if (!session->configured || !session->is_cluster())
            return false;
        std::string reason;
        if (target_hash_slot(*target, &reason) >= 0)
            return false;
        std::snprintf(why, why_len, "%s", reason.c_str());
        return true;
    } catch (...) {
        std::snprintf(why, why_len, "out of memory while checking a queue's target");
        return true;
    }
}

void drain_session_job_error(const DrainSession* session, std::size_t i, char* out, std::size_t out_len) noexcept
{
    const char* text = i < session->last_outcomes.size() ? session->last_outcomes[i].error.c_str() : "";
    std::snprintf(out, out_len, "%s", text);
}

}  // namespace jobbuf::redis
