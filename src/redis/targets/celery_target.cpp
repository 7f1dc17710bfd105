// Pure C++ regime: the `celery` target. Each job becomes a Celery task message (protocol 2, JSON
// body in base64) as kombu's Redis transport writes it (docs/formats/celery.md); a batch is one
// LPUSH <celery_queue> m1 ... mn (the worker BRPOPs: m1 runs first). Option `celery_queue`
// (default "celery"); delivery 'group' sends the task `group_class` with args [group_id].
//
// run_at: jobbuf keeps a job until its run_at (the take's rule for targets that do not carry
// run_at), then pushes it with `eta` = run_at, so a Celery worker runs it at once. Pushing it
// early with a future eta would not be safe: the worker holds such a message unacknowledged, and
// kombu's Redis transport delivers it again to another worker after its visibility timeout
// (one hour by default), so a job more than an hour ahead would run more than once.
#include "redis/regime.h"

#include <unistd.h>

#include "redis/base64.h"
#include "redis/json_fields.h"
#include "redis/json_text.h"
#include "redis/targets/target_registry.h"

namespace jobbuf::redis {
namespace {

const TargetTraits kCeleryTraits{false, nullptr, 0, nullptr};

// Celery truncates argsrepr/kwargsrepr (only shown in logs and monitors) to this many characters.
constexpr std::size_t kReprMax = 1024;

// What an identifier derived from a job id stands for (the UUID's 13th hex digit).
enum class UuidKind : unsigned { TaskId = 0, DeliveryTag = 1, GroupTaskId = 2, GroupDeliveryTag = 3 };

// An RFC 9562 version-8 UUID from the job's id salt (StagedJob::id_salt) and id:
// "ssssssss-6a62-8k00-8iii-iiiiiiiiiiii" (6a62 is "jb"; k the kind; the last 64 bits are the
// variant bits 10 and the id's low 62 bits).
void append_job_uuid(std::uint32_t salt, std::int64_t id, UuidKind kind, std::string* out)
{
    const std::uint64_t tail = 0x8000000000000000ull | (static_cast<std::uint64_t>(id) & 0x3FFFFFFFFFFFFFFFull);
    append_hex(salt, 8, out);
    out->append("-6a62-8");
    append_hex(static_cast<unsigned>(kind), 1, out);
    out->append("00-");
    append_hex(tail >> 48, 4, out);
    out->push_back('-');
    append_hex(tail, 12, out);
}

// JSON text as a JSON string, at most kReprMax bytes of it (cut at a character boundary).
void append_repr(std::string_view json, std::string* out)
{
    if (json.size() > kReprMax) {
        std::size_t cut = kReprMax - 3;
        while (cut > 0 && (static_cast<unsigned char>(json[cut]) & 0xC0) == 0x80)
            --cut;
        append_json_string(std::string(json.substr(0, cut)) + "...", out);
    } else {
        append_json_string(json, out);
    }
}

class CeleryTarget final : public QueueTarget {
public:
    CeleryTarget(std::string queue, std::string group_task, std::string origin)
        : queue_(std::move(queue)), group_task_(std::move(group_task)), origin_(std::move(origin))
    {
    }

    TargetKind kind() const override { return TargetKind::Celery; }
    std::vector<std::string> written_keys() const override { return {queue_}; }
    void add_depth_reads(CommandPipeline* pipeline) const override { pipeline->add({"LLEN", queue_}); }
    const TargetTraits& traits() const override { return kCeleryTraits; }

    // The body is base64 (4/3 of the payload) plus two reprs and the envelope.
    std::size_t bulk_overhead_bound() const override { return 4096 + 6 * queue_.size(); }
    std::size_t bulk_size(const StagedJob& job, bool, double, std::string*) const override
    {
        return base64_size(job.payload.size() + 128) + bulk_overhead_bound();
    }

    void plan_pushes(const std::vector<StagedJob>& jobs, const SkippedJobs& skip, double,
                     DeliveryPlan* plan) const override
    {
        std::vector<std::string> messages;
        messages.reserve(jobs.size());
        for (std::size_t i = 0; i < jobs.size(); ++i) {
            if (!is_sent(skip, i))
                continue;
            messages.emplace_back();
            if (!encode(jobs[i], &messages.back())) {
                messages.pop_back();
                plan_refusal(i,
                             "jobbuf: the payload is not a Celery task (an object with a string \"task\", "
                             "an array \"args\" and an object \"kwargs\")",
                             plan);
            }
        }
        if (messages.empty())
            return;
        CommandPipeline& b = plan->unit;
        b.begin(2 + messages.size());
        b.arg("LPUSH");
        b.arg(queue_);
        for (const std::string& message : messages)
            b.arg(message, std::string_view());  // copied: see arg()
        plan->pushes.push_back(DeliveryPlan::PushRange{0, jobs.size()});
    }

    // {"args": ["<group id>"], "task": "<group_class>"}, as jsonb prints it.
    void append_group_payload(std::string_view group_id, const std::int64_t*, std::size_t,
                              std::string* out) const override
    {
        append_named_group_payload("args", "[", "]", "task", group_task_, group_id, out);
    }

private:
    // The message of job; false when its payload is not a Celery task.
    bool encode(const StagedJob& job, std::string* out) const
    {
        static constexpr std::string_view kFields[] = {"task", "args", "kwargs"};
        std::string_view fields[3];
        if (!json_object_fields(job.payload, kFields, 3, fields) || fields[0].data() == nullptr ||
            fields[0].front() != '"' || (fields[1].data() != nullptr && fields[1].front() != '[') ||
            (fields[2].data() != nullptr && fields[2].front() != '{'))
            return false;
        const std::string_view args = fields[1].data() != nullptr ? fields[1] : std::string_view("[]");
        const std::string_view kwargs = fields[2].data() != nullptr ? fields[2] : std::string_view("{}");
        const UuidKind id_kind = job.marked ? UuidKind::TaskId : UuidKind::GroupTaskId;
        const UuidKind tag_kind = job.marked ? UuidKind::DeliveryTag : UuidKind::GroupDeliveryTag;
        std::string task_id;
        append_job_uuid(job.id_salt, job.visible_id(), id_kind, &task_id);

        std::string body;
        body.reserve(args.size() + kwargs.size() + 80);
        body.append("[").append(args).append(", ").append(kwargs);
        body.append(", {\"callbacks\": null, \"errbacks\": null, \"chain\": null, \"chord\": null}]");

        std::string& m = *out;
        m.reserve(base64_size(body.size()) + 2 * kReprMax + 700);
        m.append("{\"body\":\"");
        append_base64(body, &m);
        m.append("\",\"content-encoding\":\"utf-8\",\"content-type\":\"application/json\",");
        m.append("\"headers\":{\"lang\":\"py\",\"task\":").append(fields[0]);
        m.append(",\"id\":\"").append(task_id).append("\",\"shadow\":null,\"eta\":");
        if (job.run_at > job.staged_at) {
            m.push_back('"');
            append_iso8601_utc(job.run_at, &m);
            m.push_back('"');
        } else {
            m.append("null");
        }
        m.append(",\"expires\":null,\"group\":null,\"group_index\":null,\"retries\":0,\"timelimit\":[null,null],");
        m.append("\"root_id\":\"").append(task_id).append("\",\"parent_id\":null,\"argsrepr\":");
        append_repr(args, &m);
        m.append(",\"kwargsrepr\":");
        append_repr(kwargs, &m);
        m.append(",\"origin\":");
        append_json_string(origin_, &m);
        m.append(",\"ignore_result\":false},\"properties\":{\"correlation_id\":\"").append(task_id);
        m.append("\",\"delivery_mode\":2,\"delivery_info\":{\"exchange\":\"\",\"routing_key\":");
        append_json_string(queue_, &m);
        m.append("},\"priority\":0,\"body_encoding\":\"base64\",\"delivery_tag\":\"");
        append_job_uuid(job.id_salt, job.visible_id(), tag_kind, &m);
        m.append("\"}}");
        return true;
    }

    std::string queue_;
    std::string group_task_;
    std::string origin_;
};

const char kTaskHint[] = "Stage a JSON object like {\"task\": \"proj.tasks.add\", \"args\": [1, 2], "
                         "\"kwargs\": {}}: Celery calls the task named \"task\" with *args and **kwargs.";

const PayloadRule kCeleryRules[] = {
    {"task", JsonKind::String, true, kTaskHint},
    {"args", JsonKind::Array, false, kTaskHint},
    {"kwargs", JsonKind::Object, false, kTaskHint},
};

}  // namespace

const PayloadShape kCeleryPayload{kCeleryRules, sizeof kCeleryRules / sizeof kCeleryRules[0], true, kTaskHint};

std::unique_ptr<QueueTarget> make_celery_target(const TargetSetup& setup, std::string*)
{
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    host[sizeof host - 1] = '\0';
    return std::make_unique<CeleryTarget>(std::string(setup.option("celery_queue", "celery")),
                                          std::string(setup.option("group_class", "")), std::string("jobbuf@") + host);
}

}  // namespace jobbuf::redis
