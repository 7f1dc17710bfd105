// Pure C++ regime: turns one batch of staged jobs into one atomic Redis unit
// (MULTI, the pushes, SET <marker> <job ids>, EXEC) and reads the per-job outcome from the
// replies. The marker is what makes delivery effectively-once: see README "Delivery guarantee".
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "redis/command_batch.h"
#include "redis/reply.h"

namespace jobbuf::redis {

struct StagedJob {
    std::int64_t id = 0;
    std::string_view payload;  // the job's JSON text (jsonb canonical output)
    double staged_at = 0;      // epoch seconds
    double run_at = 0;         // epoch seconds
    bool payload_has_retry = false;  // sidekiq: the payload sets "retry" itself
    // Nonzero when the job was never rendered because its text is longer than Redis accepts: at
    // least this many bytes. Such a job is not sent (JobOutcome TooLarge); payload is empty.
    std::size_t known_too_large = 0;
    bool marked = true;  // named by the batch marker; false for group messages, whose jobs stay
                         // in Postgres (claimed) and must never be deleted by reconciliation
};

struct QueueTarget {
    enum class Kind { List, Stream, Sidekiq };
    Kind kind = Kind::List;
    std::string key;             // list/stream key
    long long maxlen = 0;        // stream: MAXLEN ~ n when > 0
    // sidekiq (used by the sidekiq encoder)
    std::string sidekiq_queue;
    std::string namespace_prefix;  // "" or "<ns>:"
    int sidekiq_version = 7;
    std::uint32_t jid_salt = 0;    // sidekiq: jid = 8 hex of jid_salt + 16 hex of the job id
};

// What happened to each job of a batch.
struct JobOutcome {
    // TooLarge: never sent, Redis would refuse it (see plan_delivery's max_bulk_bytes).
    enum class Kind { Delivered, Rejected, Retry, TooLarge };
    Kind kind = Kind::Retry;
    std::string error;  // Rejected/Retry: the Redis error text; TooLarge: why
};

struct DeliveryPlan {
    CommandBatch batch;
    // For each command of the batch after MULTI and before the marker: the half-open range of
    // job indexes whose delivery that command carries.
    struct PushRange { std::size_t first, last; };
    std::vector<PushRange> pushes;
    // Jobs left out of the unit because Redis would refuse them (larger than max_bulk_bytes), with
    // the size of the bulk string they would have been.
    struct Oversized { std::size_t job; std::size_t bytes; bool at_least; };
    std::vector<Oversized> oversized;
    std::size_t max_bulk_bytes = 0;
};

// Redis's own default and ceiling for one bulk string (proto-max-bulk-len).
constexpr std::size_t kDefaultMaxBulkBytes = 512ull * 1024 * 1024;

// Builds MULTI + pushes + SET marker_key "<id>,<id>,..." + EXEC for jobs (already in id order);
// the marker names the marked jobs that are sent. A job whose bulk string (its payload, or its
// Sidekiq JSON) would be longer than max_bulk_bytes is left out of the unit (plan->oversized):
// Redis would answer it with a protocol error and close the connection.
// Large payloads are referenced by the plan's batch, not copied: they must outlive it.
// now_epoch is the push time (Sidekiq's enqueued_at). Returns false and sets *error only when
// memory runs out; never throws.
bool plan_delivery(const QueueTarget& target, const std::vector<StagedJob>& jobs,
                   std::string_view marker_key, double now_epoch, DeliveryPlan* plan,
                   std::string* error, std::size_t max_bulk_bytes = kDefaultMaxBulkBytes) noexcept;

// Reads the replies of a plan's batch. Returns false (and sets *error) when the transaction as a
// whole did not run (EXECABORT, MULTI refused, malformed replies): then every job must stay
// staged. Otherwise fills outcomes (one per job; TooLarge for the plan's oversized jobs).
bool read_delivery(const DeliveryPlan& plan, const std::vector<RedisReply>& replies,
                   std::size_t job_count, std::vector<JobOutcome>* outcomes,
                   std::string* error) noexcept;

// The marker's value "<id>,<id>,..." and back; parse returns false on anything malformed.
std::string format_marker(const std::vector<std::int64_t>& ids);
bool parse_marker(std::string_view text, std::vector<std::int64_t>* ids) noexcept;

}  // namespace jobbuf::redis
