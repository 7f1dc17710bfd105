// Pure C++ regime: a queue's target as the Postgres regime holds it: an opaque pointer made once
// per queue-list load from the queue's target name and options, and plain noexcept calls.
#pragma once
#include <cstddef>
#include <cstdint>

#include "redis/job_types.h"

namespace jobbuf::redis {

class QueueTarget;

// The target `target_name` for queue `queue`, its options parsed (targets/target_registry.h);
// NULL with a one-line *error when the name is unknown, an option does not parse or memory ran out.
QueueTarget* queue_target_create(const char* target_name, const char* queue, const TargetOption* options,
                                 std::size_t option_count, char* error, std::size_t error_len) noexcept;

void queue_target_destroy(QueueTarget* target) noexcept;

// What target `target_name` needs of each payload a queue with delivery 'each' stages; NULL for
// a name no target has (such as 'none': any JSON value).
const PayloadShape* target_payload_shape(const char* target_name) noexcept;

// What the take must know of the target (never NULL for a created target).
const TargetTraits* queue_target_traits(const QueueTarget* target) noexcept;

// The queue option max_in_redis (0: no cap; see drain_session_depth).
long long queue_target_max_in_redis(const QueueTarget* target) noexcept;

// What its depth reads read (QueueTarget::depth_identity): equal for capped queues that share keys.
std::uint64_t queue_target_depth_identity(const QueueTarget* target) noexcept;

// The queue option max_rate, jobs per second (0: no limit; see delivery/rate_limit.h).
double queue_target_max_rate(const QueueTarget* target) noexcept;

// The payload of the message that stands for a claimed group with these job ids. Writes at most
// out_len bytes, NUL-terminated, and returns the payload's length; a result >= out_len means
// out was too small (call again with result + 1 bytes). Returns 0 when memory runs out.
std::size_t queue_target_group_payload(const QueueTarget* target, const char* group_id, const std::int64_t* ids,
                                       std::size_t count, char* out, std::size_t out_len) noexcept;

}  // namespace jobbuf::redis
