// Pure C++ regime: the `bullmq` target. A batch becomes one EVAL of bullmq_add_script.h, which
// adds every job to one BullMQ queue as BullMQ's own Queue.add would (docs/formats/bullmq.md):
// the job hash <prefix>:<queue>:<job id>, the wait list (or paused list, prioritized set), the
// delayed set for a run_at still ahead, the events stream and the marker workers wait on. The
// script refuses the whole batch before writing anything when a key has another type, so the
// batch is written completely or not at all, inside the unit's MULTI/EXEC with its marker.
// Options `prefix` (default "bull") and `bullmq_queue` (default the queue's name); delivery
// 'group' adds one job named `group_class` (default the queue's name) whose data is
// {"group_id": "<uuid>"}.
#include "redis/regime.h"

#include <charconv>
#include <cmath>

#include "redis/json_fields.h"
#include "redis/json_text.h"
#include "redis/targets/bullmq_add_script.h"
#include "redis/targets/target_registry.h"

namespace jobbuf::redis {
namespace {

// BullMQ's own schedule holds delayed jobs: a job is pushed as soon as it is staged, as a delayed
// job when its run_at is ahead.
const TargetTraits kBullmqTraits{true, nullptr, 0, nullptr};

// The keys the script reads and writes, after "<prefix>:<queue>:" (the order of its KEYS).
constexpr const char* kScriptKeys[] = {"wait",    "paused", "meta",   "active", "prioritized",
                                       "delayed", "events", "marker", "pc",     "id"};
constexpr std::size_t kScriptKeyCount = sizeof kScriptKeys / sizeof kScriptKeys[0];
constexpr std::size_t kArgsPerJob = 7;

// BullMQ refuses larger priorities (Queue.add: "Priority should be between 0 and 2097152").
constexpr long long kMaxPriority = 2097151;

std::string decimal(long long v)
{
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, res.ptr);
}

// One job as the script's seven arguments.
struct BullmqJob {
    std::string id, name, opts, timestamp, delay, priority;
    std::string_view data;
};

class BullmqTarget final : public QueueTarget {
public:
    BullmqTarget(std::string base, std::string group_name) : base_(std::move(base)), group_name_(std::move(group_name))
    {
    }

    TargetKind kind() const override { return TargetKind::Bullmq; }
    const TargetTraits& traits() const override { return kBullmqTraits; }
    std::vector<std::string> written_keys() const override
    {
        std::vector<std::string> keys;
        for (const char* key : kScriptKeys)
            keys.push_back(base_ + key);
        return keys;
    }
    // The jobs BullMQ's workers have yet to take (Queue#getWaitingCount counts wait and paused,
    // plus prioritized, which takes waiting jobs with a priority).
    void add_depth_reads(CommandPipeline* pipeline) const override
    {
        pipeline->add({"LLEN", base_ + "wait"});
        pipeline->add({"LLEN", base_ + "paused"});
        pipeline->add({"ZCARD", base_ + "prioritized"});
    }
    std::size_t depth_read_count() const override { return 3; }

    // The opts argument (the largest besides data and name, both parts of the payload) carries
    // at most the payload's opts plus jobbuf's own fields.
    std::size_t bulk_overhead_bound() const override { return 160; }
    std::size_t bulk_size(const StagedJob& job, bool, double, std::string*) const override
    {
        return job.payload.size() + bulk_overhead_bound();
    }

    void plan_pushes(const std::vector<StagedJob>& jobs, const SkippedJobs& skip, double now_epoch,
                     DeliveryPlan* plan) const override
    {
        std::vector<BullmqJob> encoded;
        std::vector<std::size_t> refused;
        encoded.reserve(jobs.size());
        std::string why;
        for (std::size_t i = 0; i < jobs.size(); ++i) {
            if (!is_sent(skip, i))
                continue;
            encoded.emplace_back();
            if (!encode(jobs[i], now_epoch, &encoded.back(), &why)) {
                encoded.pop_back();
                plan_refusal(i, why, plan);
            }
        }
        if (encoded.empty())
            return;
        CommandPipeline& b = plan->unit;
        b.begin(3 + kScriptKeyCount + 1 + kArgsPerJob * encoded.size());
        b.arg("EVAL");
        b.arg(kBullmqAddScript);
        b.arg(decimal(kScriptKeyCount));
        for (const char* key : kScriptKeys)
            b.arg(base_ + key);
        b.arg(base_);
        // Everything but data (a view of the payload) lives in `encoded`, gone when this returns:
        // the head form of arg() copies it, however long.
        for (const BullmqJob& job : encoded) {
            b.arg(job.id);
            b.arg(job.name, std::string_view());
            b.arg(job.data);
            b.arg(job.opts, std::string_view());
            b.arg(job.timestamp);
            b.arg(job.delay);
            b.arg(job.priority);
        }
        plan->pushes.push_back(DeliveryPlan::PushRange{0, jobs.size()});
    }

    // {"data": {"group_id": "<uuid>"}, "name": "<group_class>"}, as jsonb prints it.
    void append_group_payload(std::string_view group_id, const std::int64_t*, std::size_t,
                              std::string* out) const override
    {
        append_named_group_payload("data", "{\"group_id\": ", "}", "name", group_name_, group_id, out);
    }

private:
    // The job id: "jb-<8 hex of the job's id salt>-<id>" (BullMQ refuses custom ids that are integers or
    // contain ':'); a group's message (not marked: its id comes from the group id) "jbg-<16 hex>".
    void append_job_id(const StagedJob& job, std::string* out) const
    {
        if (job.marked) {
            out->append("jb-");
            append_hex(job.id_salt, 8, out);
            out->push_back('-');
            out->append(decimal(job.visible_id()));
        } else {
            out->append("jbg-");
            append_hex(static_cast<std::uint64_t>(job.id), 16, out);
        }
    }

    // The script's arguments for job; false with *why when its payload is not a BullMQ job.
    bool encode(const StagedJob& job, double now_epoch, BullmqJob* out, std::string* why) const
    {
        static constexpr std::string_view kFields[] = {"name", "data", "opts"};
        static constexpr std::string_view kOpts[] = {"priority", "attempts", "backoff", "removeOnComplete",
                                                     "removeOnFail"};
        std::string_view fields[3];
        std::string_view opts[5];
        if (!json_object_fields(job.payload, kFields, 3, fields) || fields[1].data() == nullptr ||
            !json_string_value(fields[0], &out->name)) {
            *why = "jobbuf: the payload is not a BullMQ job (an object with a string \"name\" and \"data\")";
            return false;
        }
        if (fields[2].data() != nullptr && !json_object_fields(fields[2], kOpts, 5, opts)) {
            *why = "jobbuf: the payload's \"opts\" is not an object";
            return false;
        }
        long long priority = 0;
        if (opts[0].data() != nullptr && !json_small_integer(opts[0], kMaxPriority, &priority)) {
            *why = "jobbuf: the payload's \"opts.priority\" is not an integer from 0 to 2097151";
            return false;
        }
        const long long timestamp = std::llround(job.staged_at * 1000);
        const long long delay = job.run_at > now_epoch ? std::max(1LL, std::llround(job.run_at * 1000) - timestamp) : 0;
        out->data = fields[1];
        append_job_id(job, &out->id);
        out->timestamp = decimal(timestamp);
        out->delay = decimal(delay);
        out->priority = decimal(priority);

        // The opts as Queue.add stores them: attempts always, a numeric backoff as a fixed one,
        // the custom jobId, the delay of a delayed job, the other options as given.
        std::string& o = out->opts;
        o.append("{\"attempts\":");
        o.append(opts[1].data() != nullptr ? opts[1] : std::string_view("0"));
        o.append(",\"jobId\":\"");
        o.append(out->id);
        o.push_back('"');
        if (delay > 0)
            o.append(",\"delay\":").append(out->delay);
        if (opts[0].data() != nullptr)
            o.append(",\"priority\":").append(out->priority);
        if (opts[2].data() != nullptr) {
            o.append(",\"backoff\":");
            if (opts[2].front() == '{')
                o.append(opts[2]);
            else
                o.append("{\"type\":\"fixed\",\"delay\":").append(opts[2]).push_back('}');
        }
        if (opts[3].data() != nullptr)
            o.append(",\"removeOnComplete\":").append(opts[3]);
        if (opts[4].data() != nullptr)
            o.append(",\"removeOnFail\":").append(opts[4]);
        o.push_back('}');
        return true;
    }

    std::string base_;  // "<prefix>:<queue>:"
    std::string group_name_;
};

const char kOptsHint[] =
    "BullMQ job options jobbuf carries: {\"priority\": 0-2097151, \"attempts\": n, \"backoff\": ms or "
    "{\"type\": \"fixed\"|\"exponential\", \"delay\": ms}, \"removeOnComplete\": true|n|{\"age\", \"count\", \"limit\"}, "
    "\"removeOnFail\": ...}; a delay comes from the job's run_at, its id from jobbuf.";

// BullMQ's Worker fails (and leaves the job active) on a backoff type it does not know, and its
// scripts do arithmetic on the removeOn* members: only what it can carry is staged.
constexpr const char* kBackoffTypes[] = {"fixed", "exponential", nullptr};
const PayloadRule kBackoffRules[] = {
    {"type", JsonKind::String, true, kOptsHint, 9007199254740991, nullptr, kBackoffTypes},
    {"delay", JsonKind::Integer, false, kOptsHint},
};
const PayloadShape kBackoffShape{kBackoffRules, sizeof kBackoffRules / sizeof kBackoffRules[0], true, kOptsHint};

const PayloadRule kKeepJobsRules[] = {
    {"age", JsonKind::Integer, false, kOptsHint},
    {"count", JsonKind::Integer, false, kOptsHint},
    {"limit", JsonKind::Integer, false, kOptsHint},
};
const PayloadShape kKeepJobsShape{kKeepJobsRules, sizeof kKeepJobsRules / sizeof kKeepJobsRules[0], true, kOptsHint};

const PayloadRule kOptsRules[] = {
    {"priority", JsonKind::Integer, false, kOptsHint, kMaxPriority},
    {"attempts", JsonKind::Integer, false, kOptsHint},
    {"backoff", JsonKind::Integer | JsonKind::Object, false, kOptsHint, 9007199254740991, &kBackoffShape},
    {"removeOnComplete", JsonKind::Boolean | JsonKind::Integer | JsonKind::Object, false, kOptsHint, 9007199254740991,
     &kKeepJobsShape},
    {"removeOnFail", JsonKind::Boolean | JsonKind::Integer | JsonKind::Object, false, kOptsHint, 9007199254740991,
     &kKeepJobsShape},
};
const PayloadShape kOptsShape{kOptsRules, sizeof kOptsRules / sizeof kOptsRules[0], true, kOptsHint};

const char kJobHint[] = "Stage a JSON object like {\"name\": \"welcome\", \"data\": {\"user\": 1}} "
                        "(optionally with \"opts\"): the BullMQ Worker's job.name and job.data.";

const PayloadRule kBullmqRules[] = {
    {"name", JsonKind::String, true, kJobHint},
    {"data", JsonKind::Any, true, kJobHint},
    {"opts", JsonKind::Object, false, kOptsHint, 9007199254740991, &kOptsShape},
};

}  // namespace

const PayloadShape kBullmqPayload{kBullmqRules, sizeof kBullmqRules / sizeof kBullmqRules[0], true, kJobHint};

std::unique_ptr<QueueTarget> make_bullmq_target(const TargetSetup& setup, std::string* error)
{
    std::string_view queue = setup.option("bullmq_queue", setup.queue);
    if (queue.find(':') != std::string_view::npos) {
        *error = "BullMQ queue names cannot contain \":\": set the option bullmq_queue";
        return nullptr;
    }
    std::string base = std::string(setup.option("prefix", "bull")) + ":" + std::string(queue) + ":";
    return std::make_unique<BullmqTarget>(std::move(base), std::string(setup.option("group_class", setup.queue)));
}

}  // namespace jobbuf::redis
