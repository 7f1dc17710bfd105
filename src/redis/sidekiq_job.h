// Pure C++ regime: the Sidekiq job encoder. Builds the job JSON by splicing jobbuf's fields into
// the payload object's text (the payload is never parsed): queue, jid, retry (when the payload
// has none), created_at and, for immediate jobs, enqueued_at.
#pragma once
#include <cstdint>
#include <string>

#include "redis/delivery.h"

namespace jobbuf::redis {

// 24 lowercase hex characters: 8 of the salt, then 16 of the job id.
void append_sidekiq_jid(std::uint32_t salt, std::int64_t job_id, std::string* out);

// The Sidekiq JSON of job in two parts: *head (jobbuf's fields spliced after the payload's "{";
// replaced, not appended to) and the returned tail, a view of the rest of the payload. Sending
// head then tail is the job; the payload itself is never copied. May throw std::bad_alloc.
std::string_view sidekiq_job_head(const QueueTarget& target, const StagedJob& job, bool immediate,
                                  double now_epoch, std::string* head);

// At least as long as any head sidekiq_job_head writes for target (a cheap size check).
std::size_t sidekiq_head_bound(const QueueTarget& target);

// Appends the Sidekiq JSON of job to *out (head then tail). immediate: pushed to the queue now (gets
// enqueued_at = now_epoch); otherwise scheduled. Timestamps are float epoch seconds for
// sidekiq_version 6/7 and integer epoch milliseconds for 8 and later. A payload that is not a
// JSON object text is appended unchanged (the Postgres side only stages objects).
// May throw std::bad_alloc.
void append_sidekiq_job(const QueueTarget& target, const StagedJob& job, bool immediate,
                        double now_epoch, std::string* out);

}  // namespace jobbuf::redis
