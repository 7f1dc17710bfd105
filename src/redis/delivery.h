// Pure C++ regime: turns one batch of staged jobs into one atomic Redis unit
// (MULTI, the pushes, SET <marker> <job ids>, EXEC) and reads the per-job outcome from the
// replies. The marker is what makes delivery effectively-once: see README "Delivery guarantee".
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "redis/delivery_plan.h"
#include "redis/job_types.h"
#include "redis/reply.h"
#include "redis/targets/queue_target.h"

namespace jobbuf::redis {

// What happened to each job of a batch, and why when it was not delivered.
struct JobOutcome {
    JobResult result = JobResult::Retry;
    std::string error;  // Rejected/Retry: the Redis error text; TooLarge: why
};

// Redis's own default and ceiling for one bulk string (proto-max-bulk-len).
constexpr std::size_t kDefaultMaxBulkBytes = 512ull * 1024 * 1024;

// What a 1.3 marker says besides the ids: which start wrote it (the lease's holder name, with
// the postmaster's start) and the unit's delivery number, the counter the writer also records in
// its WAL-logged jobbuf.delivery_counter in the batch's own transaction (docs/copies.md).
struct MarkerStamp {
    std::int64_t number = 0;
    std::string_view writer;
};

// A marker as read: 1.2's "<id>,<id>,..." (legacy: no number, no writer) or 1.3's
// "2;<number>;<digest>;<ids>;<writer>". The digest (marker_digest) covers the named jobs' ids and
// staged_at: a later start that finds every named job staged as it was pushed knows the marker
// names its own batch in flight, not jobs that a copy staged under the same ids.
struct MarkerValue {
    bool legacy = true;
    std::int64_t number = 0;
    std::uint64_t digest = 0;
    std::vector<std::int64_t> ids;
    std::string writer;
};

// The sum of an FNV-1a hash of each job's id and staged_at (epoch seconds, rounded to the
// microsecond): the same in any order.
std::uint64_t marker_digest(const std::int64_t* ids, const double* staged_at, std::size_t count) noexcept;
std::string format_marker_value(std::int64_t number, std::uint64_t digest, const std::vector<std::int64_t>& ids,
                                std::string_view writer);
bool parse_marker_value(std::string_view text, MarkerValue* value) noexcept;

// Builds MULTI + the target's pushes + SET marker_key <marker> + EXEC for jobs (already in id order);
// the marker is 1.3's when stamp is given ("2;<number>;<digest>;<ids>;<writer>"), 1.2's otherwise;
// the marker names the marked jobs that are sent. A job whose bulk string (its payload, or its
// Sidekiq JSON) would be longer than max_bulk_bytes is left out of the unit (plan->oversized):
// Redis would answer it with a protocol error and close the connection.
// Large payloads are referenced by the plan's unit, not copied: they must outlive it.
// now_epoch is the push time (Sidekiq's enqueued_at). Returns false and sets *error only when
// memory runs out; never throws.
bool plan_delivery(const QueueTarget& target, const std::vector<StagedJob>& jobs, std::string_view marker_key,
                   double now_epoch, DeliveryPlan* plan, std::string* error,
                   std::size_t max_bulk_bytes = kDefaultMaxBulkBytes, const MarkerStamp* stamp = nullptr) noexcept;

// Reads the replies of a plan's unit. Returns false (and sets *error) when the transaction as a
// whole did not run (EXECABORT, MULTI refused, malformed replies): then every job must stay
// staged. Otherwise fills outcomes (one per job; TooLarge for the plan's oversized jobs).
bool read_delivery(const DeliveryPlan& plan, const std::vector<RedisReply>& replies, std::size_t job_count,
                   std::vector<JobOutcome>* outcomes, std::string* error) noexcept;

// The marker's value "<id>,<id>,..." and back; parse returns false on anything malformed.
std::string format_marker(const std::vector<std::int64_t>& ids);
bool parse_marker(std::string_view text, std::vector<std::int64_t>* ids) noexcept;

}  // namespace jobbuf::redis
