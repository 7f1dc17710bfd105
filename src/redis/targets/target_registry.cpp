// Pure C++ regime: the list of targets, option reading shared by all of them, and the default
// group message (see target_registry.h and queue_target.h).
#include "redis/regime.h"

#include <charconv>

#include "redis/json_text.h"
#include "redis/targets/target_registry.h"

namespace jobbuf::redis {
namespace {

using TargetFactory = std::unique_ptr<QueueTarget> (*)(const TargetSetup&, std::string*);

struct RegisteredTarget {
    std::string_view name;
    TargetFactory make;
    const PayloadShape* payload;
};

// One line per target.
const RegisteredTarget kTargets[] = {
    {"list", make_list_target, &kListPayload},          {"stream", make_stream_target, &kStreamPayload},
    {"sidekiq", make_sidekiq_target, &kSidekiqPayload}, {"bullmq", make_bullmq_target, &kBullmqPayload},
    {"celery", make_celery_target, &kCeleryPayload},
};

}  // namespace

std::string_view TargetSetup::option(std::string_view name, std::string_view fallback) const
{
    for (std::size_t i = 0; i < option_count; ++i)
        if (name == options[i].name)
            return options[i].value;
    return fallback;
}

bool TargetSetup::integer_option(std::string_view name, long long fallback, long long min, long long max,
                                 long long* out, std::string* error) const
{
    std::string_view text = option(name, std::string_view());
    if (text.data() == nullptr) {
        *out = fallback;
        return true;
    }
    long long value = 0;
    auto res = std::from_chars(text.data(), text.data() + text.size(), value);
    if (res.ec != std::errc() || res.ptr != text.data() + text.size() || value < min || value > max) {
        *error = "queue option \"" + std::string(name) + "\" is not a valid integer: " + std::string(text);
        return false;
    }
    *out = value;
    return true;
}

void QueueTarget::append_group_payload(std::string_view group_id, const std::int64_t* ids, std::size_t count,
                                       std::string* out) const
{
    char buf[24];
    out->append("{\"ids\": [");
    for (std::size_t i = 0; i < count; ++i) {
        if (i != 0)
            out->append(", ");
        auto res = std::to_chars(buf, buf + sizeof buf, ids[i]);
        out->append(buf, res.ptr);
    }
    out->append("], \"group_id\": \"");
    out->append(group_id);  // a uuid's text: nothing to escape
    out->append("\"}");
}

void QueueTarget::set_max_in_redis(long long cap)
{
    max_in_redis_ = cap;
    // FNV-1a over the depth reads' bytes: the same commands, the same depth.
    CommandPipeline reads;
    add_depth_reads(&reads);
    std::uint64_t hash = 14695981039346656037ULL;
    for (unsigned char c : reads.wire())
        hash = (hash ^ c) * 1099511628211ULL;
    depth_identity_ = hash;
    capped_traits_ = traits();
    capped_traits_.carries_run_at = false;
}

bool QueueTarget::depth_from(const RedisReply* replies, long long* depth, std::string* error) const
{
    long long sum = 0;
    for (std::size_t i = 0; i < depth_read_count(); ++i) {
        if (replies[i].type != RedisReply::Type::Integer) {
            *error = replies[i].is_error() ? replies[i].str : "not an integer";
            return false;
        }
        sum += replies[i].integer;
    }
    *depth = sum;
    return true;
}

void append_job_uid(const StagedJob& job, std::string* out)
{
    append_hex(job.id_salt, 8, out);
    append_hex(static_cast<std::uint64_t>(job.visible_id()), 16, out);
}

void plan_refusal(std::size_t job, std::string_view why, DeliveryPlan* plan)
{
    plan->unit.add({"EVAL", "return redis.error_reply(ARGV[1])", "0", why});
    plan->pushes.push_back(DeliveryPlan::PushRange{job, job + 1});
}

const PayloadShape* payload_shape_of(std::string_view name) noexcept
{
    for (const RegisteredTarget& target : kTargets)
        if (target.name == name)
            return target.payload;
    return nullptr;
}

void append_named_group_payload(std::string_view id_key, std::string_view open, std::string_view close,
                                std::string_view name_key, std::string_view name, std::string_view group_id,
                                std::string* out)
{
    out->append("{\"").append(id_key).append("\": ").append(open).append("\"");
    out->append(group_id);  // a uuid's text: nothing to escape
    out->append("\"").append(close).append(", \"").append(name_key).append("\": ");
    append_json_string(name, out);
    out->push_back('}');
}

std::unique_ptr<QueueTarget> make_queue_target(std::string_view name, const TargetSetup& setup, std::string* error)
{
    for (const RegisteredTarget& target : kTargets) {
        if (target.name != name)
            continue;
        long long cap = 0;
        if (!setup.integer_option("max_in_redis", 0, 1, 2147483647, &cap, error))
            return nullptr;
        double rate = 0;
        std::string_view rate_text = setup.option("max_rate", std::string_view());
        if (rate_text.data() != nullptr) {
            auto res = std::from_chars(rate_text.data(), rate_text.data() + rate_text.size(), rate);
            if (res.ec != std::errc() || res.ptr != rate_text.data() + rate_text.size() || !(rate > 0) || rate > 1e9) {
                *error = "queue option \"max_rate\" is not a number of jobs per second: " + std::string(rate_text);
                return nullptr;
            }
        }
        std::unique_ptr<QueueTarget> made = target.make(setup, error);
        if (made) {
            made->set_max_in_redis(cap);
            made->set_max_rate(rate);
        }
        return made;
    }
    *error = "unknown target \"" + std::string(name) + "\"";
    return nullptr;
}

}  // namespace jobbuf::redis
