// Pure C++ regime: the `sidekiq` target. Jobs become Sidekiq job JSON (sidekiq_job.h): immediate
// ones are pushed to <ns>queue:<q> (with SADD <ns>queues <q>), later ones are added to
// <ns>schedule at their run_at, where Sidekiq's poller picks them up. Options `sidekiq_queue`
// (default the queue's name), `namespace`, `sidekiq_version` (6, 7 or 8) and, for delivery
// 'group', `group_class`.
#include "redis/regime.h"

#include "redis/json_text.h"
#include "redis/targets/sidekiq_job.h"
#include "redis/targets/target_registry.h"

namespace jobbuf::redis {
namespace {

// The payload keys Sidekiq's job format gives jobbuf to write: a payload's own are dropped.
constexpr const char* kSidekiqOwnKeys[] = {"queue", "jid", "created_at", "enqueued_at"};

const TargetTraits kSidekiqTraits{
    true,  // carries run_at: scheduled jobs go to Sidekiq's schedule
    kSidekiqOwnKeys, sizeof kSidekiqOwnKeys / sizeof kSidekiqOwnKeys[0],
    "retry",  // "retry": true is added unless the payload says
};

class SidekiqTarget final : public QueueTarget {
public:
    explicit SidekiqTarget(SidekiqOptions options) : options_(std::move(options)) {}

    TargetKind kind() const override { return TargetKind::Sidekiq; }
    const TargetTraits& traits() const override { return kSidekiqTraits; }
    std::vector<std::string> written_keys() const override
    {
        const std::string& ns = options_.namespace_prefix;
        return {ns + "queues", ns + "queue:" + options_.sidekiq_queue, ns + "schedule"};
    }
    // Sidekiq's own count of a queue's waiting jobs (Sidekiq::Queue#size).
    void add_depth_reads(CommandPipeline* pipeline) const override
    {
        pipeline->add({"LLEN", options_.namespace_prefix + "queue:" + options_.sidekiq_queue});
    }

    std::size_t bulk_overhead_bound() const override { return sidekiq_head_bound(options_); }

    std::size_t bulk_size(const StagedJob& job, bool immediate, double now_epoch, std::string* scratch) const override
    {
        std::string_view tail = sidekiq_job_head(options_, job, immediate, now_epoch, scratch);
        return scratch->size() + tail.size();
    }

    // Each maximal run of consecutive immediate jobs becomes SADD <ns>queues <q> plus one
    // LPUSH <ns>queue:<q> j1 ... jn (Sidekiq pops from the right: j1 runs first), both carrying
    // the run; each run of scheduled jobs becomes one ZADD <ns>schedule <run_at> <job> ... . Runs
    // keep the id order; a batch that is all immediate (the usual case) is exactly one SADD and
    // one LPUSH. Each job is sent as its head and its payload's tail (sidekiq_job.h), so a large
    // payload is not copied.
    void plan_pushes(const std::vector<StagedJob>& jobs, const SkippedJobs& skip, double now_epoch,
                     DeliveryPlan* plan) const override
    {
        CommandPipeline& b = plan->unit;
        const std::string queues_key = options_.namespace_prefix + "queues";
        const std::string queue_key = options_.namespace_prefix + "queue:" + options_.sidekiq_queue;
        const std::string schedule_key = options_.namespace_prefix + "schedule";
        std::string head, score;
        std::size_t i = 0;
        while (i < jobs.size()) {
            const bool immediate = jobs[i].run_at <= now_epoch;
            std::size_t end = i;
            while (end < jobs.size() && (jobs[end].run_at <= now_epoch) == immediate)
                ++end;
            const std::size_t n = count_sent(skip, i, end);
            if (n > 0 && immediate) {
                b.add({"SADD", queues_key, options_.sidekiq_queue});
                plan->pushes.push_back(DeliveryPlan::PushRange{i, end});
                b.begin(2 + n);
                b.arg("LPUSH");
                b.arg(queue_key);
            } else if (n > 0) {
                b.begin(2 + 2 * n);
                b.arg("ZADD");
                b.arg(schedule_key);
            }
            for (std::size_t j = i; j < end && n > 0; ++j) {
                if (!is_sent(skip, j))
                    continue;
                if (!immediate) {
                    score.clear();
                    append_epoch_seconds(jobs[j].run_at, &score);
                    b.arg(score);
                }
                std::string_view tail = sidekiq_job_head(options_, jobs[j], immediate, now_epoch, &head);
                b.arg(head, tail);
            }
            if (n > 0)
                plan->pushes.push_back(DeliveryPlan::PushRange{i, end});
            i = end;
        }
    }

    // {"args": ["<group id>"], "class": "<group_class>"}, as jsonb prints it.
    void append_group_payload(std::string_view group_id, const std::int64_t*, std::size_t,
                              std::string* out) const override
    {
        append_named_group_payload("args", "[", "]", "class", options_.group_class, group_id, out);
    }

private:
    SidekiqOptions options_;
};

// Sidekiq runs Object.const_get(class).new.perform(*args).
const PayloadRule kSidekiqRules[] = {
    {"class", JsonKind::String, true, "Stage a JSON object like {\"class\": \"HardWorker\", \"args\": [1, 2]}."},
    {"args", JsonKind::Array, true, "Sidekiq calls perform(*args): use \"args\": [] for none."},
};

}  // namespace

const PayloadShape kSidekiqPayload{kSidekiqRules, sizeof kSidekiqRules / sizeof kSidekiqRules[0]};

std::unique_ptr<QueueTarget> make_sidekiq_target(const TargetSetup& setup, std::string* error)
{
    SidekiqOptions options;
    long long version = 7;
    if (!setup.integer_option("sidekiq_version", 7, 6, 99, &version, error))
        return nullptr;
    options.sidekiq_version = static_cast<int>(version);
    options.sidekiq_queue = std::string(setup.option("sidekiq_queue", setup.queue));
    std::string_view ns = setup.option("namespace", std::string_view());
    if (ns.data() != nullptr)
        options.namespace_prefix = std::string(ns) + ":";
    options.group_class = std::string(setup.option("group_class", ""));
    return std::make_unique<SidekiqTarget>(std::move(options));
}

}  // namespace jobbuf::redis
