// Pure C++ regime: the noexcept calls behind target_handle.h.
#include "redis/regime.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "redis/target_handle.h"
#include "redis/targets/target_registry.h"

namespace jobbuf::redis {

QueueTarget* queue_target_create(const char* target_name, const char* queue, const TargetOption* options,
                                 std::size_t option_count, char* error, std::size_t error_len) noexcept
{
    try {
        TargetSetup setup{queue, options, option_count};
        std::string why;
        std::unique_ptr<QueueTarget> target = make_queue_target(target_name, setup, &why);
        if (!target)
            std::snprintf(error, error_len, "%s", why.c_str());
        return target.release();
    } catch (...) {
        std::snprintf(error, error_len, "out of memory while reading the queue's target options");
        return nullptr;
    }
}

const PayloadShape* target_payload_shape(const char* target_name) noexcept
{
    return payload_shape_of(target_name);
}

void queue_target_destroy(QueueTarget* target) noexcept
{
    delete target;
}

const TargetTraits* queue_target_traits(const QueueTarget* target) noexcept
{
    return &target->effective_traits();
}

long long queue_target_max_in_redis(const QueueTarget* target) noexcept
{
    return target->max_in_redis();
}

std::uint64_t queue_target_depth_identity(const QueueTarget* target) noexcept
{
    return target->depth_identity();
}

double queue_target_max_rate(const QueueTarget* target) noexcept
{
    return target->max_rate();
}

std::size_t queue_target_group_payload(const QueueTarget* target, const char* group_id, const std::int64_t* ids,
                                       std::size_t count, char* out, std::size_t out_len) noexcept
{
    try {
        std::string payload;
        target->append_group_payload(group_id, ids, count, &payload);
        if (out_len > 0) {
            std::size_t n = std::min(payload.size(), out_len - 1);
            std::memcpy(out, payload.data(), n);
            out[n] = '\0';
        }
        return payload.size();
    } catch (...) {
        return 0;
    }
}

}  // namespace jobbuf::redis
