// The Sidekiq job encoder: splices queue, jid, retry, created_at and enqueued_at into the
// payload object's JSON text. Pure C++ regime.
#include "redis/regime.h"

#include <string_view>

#include "redis/json_text.h"
#include "redis/sidekiq_job.h"

namespace jobbuf::redis {
namespace {

bool is_json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

void append_timestamp(const QueueTarget& target, double epoch_seconds, std::string* out)
{
    if (target.sidekiq_version >= 8)
        append_epoch_millis(epoch_seconds, out);
    else
        append_epoch_seconds(epoch_seconds, out);
}

void append_hex(std::uint64_t value, int digits, std::string* out)
{
    static constexpr char kHex[] = "0123456789abcdef";
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out->push_back(kHex[(value >> shift) & 15]);
}

}  // namespace

void append_sidekiq_jid(std::uint32_t salt, std::int64_t job_id, std::string* out)
{
    append_hex(salt, 8, out);
    append_hex(static_cast<std::uint64_t>(job_id), 16, out);
}

void append_sidekiq_job(const QueueTarget& target, const StagedJob& job, bool immediate, double now_epoch,
                        std::string* out)
{
    std::string_view payload = job.payload;
    std::size_t open = 0;
    while (open < payload.size() && is_json_space(payload[open])) ++open;
    if (open >= payload.size() || payload[open] != '{') {
        out->append(payload.data(), payload.size());
        return;
    }
    std::size_t next = open + 1;
    while (next < payload.size() && is_json_space(payload[next])) ++next;
    bool empty_object = next < payload.size() && payload[next] == '}';

    out->reserve(out->size() + payload.size() + 160);
    out->append(payload.data(), open + 1);
    out->append("\"queue\":");
    append_json_string(target.sidekiq_queue, out);
    out->append(",\"jid\":\"");
    append_sidekiq_jid(target.jid_salt, job.id, out);
    out->push_back('"');
    if (!job.payload_has_retry) out->append(",\"retry\":true");
    out->append(",\"created_at\":");
    append_timestamp(target, job.staged_at, out);
    if (immediate) {
        out->append(",\"enqueued_at\":");
        append_timestamp(target, now_epoch, out);
    }
    if (empty_object) {
        out->append(payload.data() + next, payload.size() - next);
    } else {
        out->push_back(',');
        out->append(payload.data() + open + 1, payload.size() - open - 1);
    }
}

}  // namespace jobbuf::redis
