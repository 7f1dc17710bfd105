// Pure C++ regime: the `list` target. A batch is one RPUSH <key> p1 ... pn (consumers BLPOP the
// payloads in id order); option `key`, default "jobbuf:<queue>".
#include "redis/regime.h"

#include "redis/targets/target_registry.h"

namespace jobbuf::redis {
namespace {

const TargetTraits kListTraits{};

class ListTarget final : public QueueTarget {
public:
    explicit ListTarget(std::string key) : key_(std::move(key)) {}

    TargetKind kind() const override { return TargetKind::List; }
    const TargetTraits& traits() const override { return kListTraits; }
    std::vector<std::string> written_keys() const override { return {key_}; }
    void add_depth_reads(CommandPipeline* pipeline) const override { pipeline->add({"LLEN", key_}); }

    void plan_pushes(const std::vector<StagedJob>& jobs, const SkippedJobs& skip, double,
                     DeliveryPlan* plan) const override
    {
        std::size_t n = count_sent(skip, 0, jobs.size());
        if (n == 0)
            return;
        CommandPipeline& b = plan->unit;
        b.begin(2 + n);
        b.arg("RPUSH");
        b.arg(key_);
        for (std::size_t i = 0; i < jobs.size(); ++i)
            if (is_sent(skip, i))
                b.arg(jobs[i].payload);
        plan->pushes.push_back(DeliveryPlan::PushRange{0, jobs.size()});
    }

private:
    std::string key_;
};

}  // namespace

const PayloadShape kListPayload{};  // any JSON value

std::unique_ptr<QueueTarget> make_list_target(const TargetSetup& setup, std::string*)
{
    std::string fallback = "jobbuf:" + std::string(setup.queue);
    return std::make_unique<ListTarget>(std::string(setup.option("key", fallback)));
}

}  // namespace jobbuf::redis
