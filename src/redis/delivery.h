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

// Builds MULTI + the target's pushes + SET marker_key "<id>,<id>,..." + EXEC for jobs (already in id order);
// the marker names the marked jobs that are sent. A job whose bulk string (its payload, or its
// Sidekiq JSON) would be longer than max_bulk_bytes is left out of the unit (plan->oversized):
// Redis would answer it with a protocol error and close the connection.
// Large payloads are referenced by the plan's unit, not copied: they must outlive it.
// now_epoch is the push time (Sidekiq's enqueued_at). Returns false and sets *error only when
// memory runs out; never throws.
bool plan_delivery(const QueueTarget& target, const std::vector<StagedJob>& jobs, std::string_view marker_key,
                   double now_epoch, DeliveryPlan* plan, std::string* error,
                   std::size_t max_bulk_bytes = kDefaultMaxBulkBytes) noexcept;

// Reads the replies of a plan's unit. Returns false (and sets *error) when the transaction as a
// whole did not run (EXECABORT, MULTI refused, malformed replies): then every job must stay
// staged. Otherwise fills outcomes (one per job; TooLarge for the plan's oversized jobs).
bool read_delivery(const DeliveryPlan& plan, const std::vector<RedisReply>& replies, std::size_t job_count,
                   std::vector<JobOutcome>* outcomes, std::string* error) noexcept;

// The marker's value "<id>,<id>,..." and back; parse returns false on anything malformed.
std::string format_marker(const std::vector<std::int64_t>& ids);
bool parse_marker(std::string_view text, std::vector<std::int64_t>* ids) noexcept;

}  // namespace jobbuf::redis
