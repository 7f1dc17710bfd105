// Pure C++ regime: the `stream` target. Each job is XADD <key> [MAXLEN ~ n] * id <id> uid <uid>
// payload <json>, one command per job so that one refused entry does not take the others down with
// it. id is the job's number in its database; uid its stable identity (append_job_uid), unique
// across databases, reinstallations and copies: what consumers deduplicate on.
// Options `key` (default "jobbuf:<queue>") and `maxlen`.
#include "redis/regime.h"

#include <algorithm>
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

    // The entries its consumers have yet to read: the largest lag of its consumer groups, or the
    // stream's length when a group's lag is unknown (Redis cannot tell after some deletions) or
    // there is no group yet.
    void add_depth_reads(CommandPipeline* pipeline) const override
    {
        pipeline->add({"XINFO", "GROUPS", key_});
        pipeline->add({"XLEN", key_});
    }
    std::size_t depth_read_count() const override { return 2; }
    bool depth_from(const RedisReply* replies, long long* depth, std::string* error) const override
    {
        const RedisReply& groups = replies[0];
        const RedisReply& length = replies[1];
        if (length.type != RedisReply::Type::Integer) {
            *error = length.is_error() ? length.str : "XLEN: not an integer";
            return false;
        }
        *depth = length.integer;
        if (groups.is_error() || groups.type != RedisReply::Type::Array || groups.elements.empty())
            return true;  // no stream yet ("no such key"), or no group: its length
        long long largest = 0;
        for (const RedisReply& group : groups.elements) {
            bool known = false;
            for (std::size_t i = 0; i + 1 < group.elements.size(); i += 2) {
                if (group.elements[i].str != "lag")
                    continue;
                if (group.elements[i + 1].type == RedisReply::Type::Integer) {
                    known = true;
                    largest = std::max(largest, group.elements[i + 1].integer);
                }
            }
            if (!known)
                return true;  // a lag Redis cannot tell (or a server before 7.0): the length
        }
        *depth = largest;
        return true;
    }

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
