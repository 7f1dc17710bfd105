// Pure C++ regime: the `stream` target. Each job is XADD <key> [MAXLEN ~ n] * id <id> uid <uid>
// payload <json>, one command per job so that one refused entry does not take the others down with
// it. id is the job's number in its database; uid its stable identity (append_job_uid), unique
// across databases, reinstallations and copies: what consumers deduplicate on.
// Options `key` (default "jobbuf:<queue>") and `maxlen`.
#include "redis/regime.h"

#include <charconv>

#include "redis/targets/target_registry.h"

namespace jobbuf::redis {
namespace {

const TargetTraits kStreamTraits{};

std::string decimal(long long v)
{
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, res.ptr);
}

class StreamTarget final : public QueueTarget {
public:
    StreamTarget(std::string key, long long maxlen) : key_(std::move(key)), maxlen_(maxlen) {}

    TargetKind kind() const override { return TargetKind::Stream; }
    std::vector<std::string> written_keys() const override { return {key_}; }
    const TargetTraits& traits() const override { return kStreamTraits; }

    void plan_pushes(const std::vector<StagedJob>& jobs, const SkippedJobs& skip, double,
                     DeliveryPlan* plan) const override
    {
        CommandPipeline& b = plan->unit;
        const std::string maxlen = maxlen_ > 0 ? decimal(maxlen_) : std::string();
        for (std::size_t i = 0; i < jobs.size(); ++i) {
            if (!is_sent(skip, i))
                continue;
            std::string id = decimal(jobs[i].id);
            std::string uid;
            append_job_uid(jobs[i], &uid);
            if (maxlen_ > 0)
                b.add({"XADD", key_, "MAXLEN", "~", maxlen, "*", "id", id, "uid", uid, "payload", jobs[i].payload});
            else
                b.add({"XADD", key_, "*", "id", id, "uid", uid, "payload", jobs[i].payload});
            plan->pushes.push_back(DeliveryPlan::PushRange{i, i + 1});
        }
    }

private:
    std::string key_;
    long long maxlen_;
};

}  // namespace

const PayloadShape kStreamPayload{};  // any JSON value

std::unique_ptr<QueueTarget> make_stream_target(const TargetSetup& setup, std::string* error)
{
    long long maxlen = 0;
    if (!setup.integer_option("maxlen", 0, 0, INT64_MAX, &maxlen, error))
        return nullptr;
    std::string fallback = "jobbuf:" + std::string(setup.queue);
    return std::make_unique<StreamTarget>(std::string(setup.option("key", fallback)), maxlen);
}

}  // namespace jobbuf::redis
