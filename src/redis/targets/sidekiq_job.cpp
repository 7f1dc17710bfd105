// The Sidekiq job encoder: splices queue, jid, retry, created_at and enqueued_at into the
// payload object's JSON text. Pure C++ regime.
#include "redis/regime.h"

#include <string_view>

#include "redis/json_text.h"
#include "redis/targets/queue_target.h"
#include "redis/targets/sidekiq_job.h"

namespace jobbuf::redis {
namespace {

bool is_json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

void append_timestamp(const SidekiqOptions& target, double epoch_seconds, std::string* out)
{
    if (target.sidekiq_version >= 8)
        append_epoch_millis(epoch_seconds, out);
    else
        append_epoch_seconds(epoch_seconds, out);
}

}  // namespace

std::string_view sidekiq_job_head(const SidekiqOptions& target, const StagedJob& job, bool immediate, double now_epoch,
                                  std::string* head)
{
    std::string_view payload = job.payload;
    head->clear();
    std::size_t open = 0;
    while (open < payload.size() && is_json_space(payload[open]))
        ++open;
    if (open >= payload.size() || payload[open] != '{')
        return payload;
    std::size_t next = open + 1;
    while (next < payload.size() && is_json_space(payload[next]))
        ++next;
    bool empty_object = next < payload.size() && payload[next] == '}';

    head->append(payload.data(), open + 1);
    head->append("\"queue\":");
    append_json_string(target.sidekiq_queue, head);
    head->append(",\"jid\":\"");
    append_job_uid(job, head);
    head->push_back('"');
    if (!job.payload_has_probed_key)
        head->append(",\"retry\":true");
    head->append(",\"created_at\":");
    append_timestamp(target, job.staged_at, head);
    if (immediate) {
        head->append(",\"enqueued_at\":");
        append_timestamp(target, now_epoch, head);
    }
    if (empty_object)
        return payload.substr(next);
    head->push_back(',');
    return payload.substr(open + 1);
}

std::size_t sidekiq_head_bound(const SidekiqOptions& target)
{
    // Fixed text and two timestamps (at most 24 characters each), the queue name escaped (at most
    // 6 characters per byte), and whitespace before the payload's "{" (jsonb text has none).
    return 256 + 6 * target.sidekiq_queue.size();
}

void append_sidekiq_job(const SidekiqOptions& target, const StagedJob& job, bool immediate, double now_epoch,
                        std::string* out)
{
    std::string head;
    std::string_view tail = sidekiq_job_head(target, job, immediate, now_epoch, &head);
    out->reserve(out->size() + head.size() + tail.size());
    out->append(head);
    out->append(tail.data(), tail.size());
}

}  // namespace jobbuf::redis
