// Pure C++ regime: DrainSession, the worker's Redis connection, marker and batch delivery behind
// a noexcept, plain-data interface (see drain_session.h).
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

namespace jobbuf::redis {

class DrainSession {
public:
    RedisConnection connection;
    RedisEndpoint endpoint;
    std::string url;
    std::string marker_key;
    long timeout_ms = 2000;
    bool configured = false;
    std::vector<std::int64_t> marker_ids;
    std::vector<JobOutcome> last_outcomes;  // of the last deliver
    std::size_t max_bulk_bytes = kDefaultMaxBulkBytes;      // in effect: the lower of these two
    std::size_t refused_bulk_bytes = kDefaultMaxBulkBytes;  // learned from protocol errors
    std::string client_name;  // names every connection of this worker (see connection_fence.h)
};

namespace {

void set_message(SessionReport* report, const std::string& text)
{
    std::snprintf(report->message, sizeof(report->message), "%s", text.c_str());
}

SessionReport report_of(SessionReport::Status status, const std::string& text)
{
    SessionReport report;
    report.status = status;
    set_message(&report, text);
    return report;
}

// Maps a failed round trip to a report; the connection is already closed by RedisConnection.
SessionReport report_failure(const RedisStatus& status, const char* doing)
{
    auto kind = status.code == RedisStatus::Code::Interrupted ? SessionReport::Status::Interrupted
                                                              : SessionReport::Status::Unavailable;
    return report_of(kind, std::string(doing) + ": " + status.message);
}

// Reads proto-max-bulk-len; Redis's default when CONFIG is refused (ACL, renamed command).
RedisStatus read_max_bulk_bytes(DrainSession* session, IoWaiter& waiter)
{
    CommandBatch batch;
    batch.add({"CONFIG", "GET", "proto-max-bulk-len"});
    std::vector<RedisReply> replies;
    RedisStatus status = session->connection.execute(batch, &replies, session->timeout_ms, waiter);
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

SessionReport out_of_memory()
{
    return report_of(SessionReport::Status::Unavailable, "out of memory in the Redis client");
}

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

SessionReport drain_session_configure(DrainSession* session, const char* redis_url,
                                      const char* password, long timeout_ms,
                                      const char* client_name) noexcept
{
    try {
        session->timeout_ms = timeout_ms;
        session->client_name = client_name;
        std::string effective = std::string(redis_url) + '\n' + (password ? password : "");
        if (session->configured && session->url == effective)
            return {};
        RedisEndpoint endpoint;
        std::string error;
        if (!parse_redis_url(redis_url, &endpoint, &error)) {
            session->configured = false;
            session->connection.close();
            return report_of(SessionReport::Status::BadConfig, "jobbuf.redis_url: " + error);
        }
        if (password != nullptr)
            endpoint.password = password;
        session->connection.close();
        session->refused_bulk_bytes = kDefaultMaxBulkBytes;  // another server: learn again
        session->endpoint = endpoint;
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
    if (session->connection.connected())
        return {};
    try {
        RedisStatus status = session->connection.connect(session->endpoint, session->timeout_ms, waiter);
        if (!status.ok()) {
            auto kind = status.code == RedisStatus::Code::Interrupted ? SessionReport::Status::Interrupted
                                                                      : SessionReport::Status::Unavailable;
            return report_of(kind, status.message);
        }
        std::string warning;
        status = fence_previous_connections(session->connection, session->client_name,
                                            session->timeout_ms, waiter, &warning);
        if (!status.ok()) {
            auto kind = status.code == RedisStatus::Code::Interrupted ? SessionReport::Status::Interrupted
                                                                      : SessionReport::Status::Unavailable;
            return report_of(kind, "fencing earlier connections: " + status.message);
        }
        status = read_max_bulk_bytes(session, waiter);
        if (!status.ok())
            return report_failure(status, "reading proto-max-bulk-len");
        *fresh = true;
        SessionReport report;
        set_message(&report, warning);  // Ok, with a warning when fencing is unavailable
        return report;
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
    return session->connection.connected();
}

void drain_session_disconnect(DrainSession* session) noexcept
{
    session->connection.close();
}

void drain_session_unconfigure(DrainSession* session) noexcept
{
    session->connection.close();
    session->configured = false;
    session->url.clear();
}

void drain_session_describe(const DrainSession* session, char* out, std::size_t out_len) noexcept
{
    try {
        std::snprintf(out, out_len, "%s", session->configured ? session->endpoint.redacted().c_str() : "(invalid jobbuf.redis_url)");
    } catch (...) {
        std::snprintf(out, out_len, "(redis)");
    }
}

SessionReport drain_session_read_marker(DrainSession* session, IoWaiter& waiter,
                                        const std::int64_t** ids, std::size_t* count) noexcept
{
    try {
        CommandBatch batch;
        batch.add({"GET", session->marker_key});
        std::vector<RedisReply> replies;
        RedisStatus status = session->connection.execute(batch, &replies, session->timeout_ms, waiter);
        if (!status.ok())
            return report_failure(status, "reading the delivery marker");
        const RedisReply& reply = replies.at(0);
        session->marker_ids.clear();
        if (reply.type == RedisReply::Type::String) {
            if (!parse_marker(reply.str, &session->marker_ids))
                return report_of(SessionReport::Status::Refused,
                                 "the delivery marker " + session->marker_key + " is malformed");
        } else if (reply.type != RedisReply::Type::Nil) {
            return report_of(SessionReport::Status::Refused,
                             "reading the delivery marker " + session->marker_key + ": " +
                                 (reply.is_error() ? reply.str : std::string("not a string")));
        }
        *ids = session->marker_ids.data();
        *count = session->marker_ids.size();
        return {};
    } catch (...) {
        session->connection.close();
        return out_of_memory();
    }
}

SessionReport drain_session_write_marker(DrainSession* session, IoWaiter& waiter,
                                         const std::int64_t* ids, std::size_t count) noexcept
{
    try {
        CommandBatch batch;
        std::string value = format_marker(std::vector<std::int64_t>(ids, ids + count));
        batch.add({"SET", session->marker_key, value});
        std::vector<RedisReply> replies;
        RedisStatus status = session->connection.execute(batch, &replies, session->timeout_ms, waiter);
        if (!status.ok())
            return report_failure(status, "rewriting the delivery marker");
        if (replies.at(0).is_error())
            return report_of(SessionReport::Status::Refused,
                             "rewriting the delivery marker: " + replies[0].str);
        return {};
    } catch (...) {
        session->connection.close();
        return out_of_memory();
    }
}

SessionReport drain_session_deliver(DrainSession* session, IoWaiter& waiter,
                                    const QueueTarget* target, const StagedJob* jobs,
                                    std::size_t count, double now_epoch, JobResult* results,
                                    char* reject_message, std::size_t reject_len) noexcept
{
    try {
        std::vector<StagedJob> batch_jobs(jobs, jobs + count);
        DeliveryPlan plan;
        std::string error;
        if (!plan_delivery(*target, batch_jobs, session->marker_key, now_epoch, &plan, &error,
                           session->max_bulk_bytes))
            return report_of(SessionReport::Status::Unavailable, error);

        std::vector<RedisReply> replies;
        RedisStatus status = session->connection.execute(plan.batch, &replies, session->timeout_ms, waiter);
        if (status.code == RedisStatus::Code::RequestRefused) {
            std::size_t largest = 0;
            for (const StagedJob& job : batch_jobs) largest = std::max(largest, job.payload.size());
            if (largest > kMinMaxBulkBytes) {
                session->refused_bulk_bytes = std::min(session->refused_bulk_bytes, largest - 1);
                session->max_bulk_bytes = std::min(session->max_bulk_bytes, session->refused_bulk_bytes);
                return report_of(SessionReport::Status::Refused,
                                 "pushing a batch: " + status.message + "; its largest job (" +
                                     std::to_string(largest) + " bytes) will not be sent again");
            }
        }
        if (!status.ok())
            return report_failure(status, "pushing a batch");

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

void drain_session_job_error(const DrainSession* session, std::size_t i, char* out, std::size_t out_len) noexcept
{
    const char* text = i < session->last_outcomes.size() ? session->last_outcomes[i].error.c_str() : "";
    std::snprintf(out, out_len, "%s", text);
}

}  // namespace jobbuf::redis
