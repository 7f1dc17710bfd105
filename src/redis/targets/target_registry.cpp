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
    for (const RegisteredTarget& target : kTargets)
        if (target.name == name)
            return target.make(setup, error);
    *error = "unknown target \"" + std::string(name) + "\"";
    return nullptr;
}

}  // namespace jobbuf::redis
