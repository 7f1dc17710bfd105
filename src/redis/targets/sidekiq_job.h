// Pure C++ regime: the Sidekiq job encoder. Builds the job JSON by splicing jobbuf's fields into
// the payload object's text (the payload is never parsed): queue, jid, retry (when the payload
// has none), created_at and, for immediate jobs, enqueued_at.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "redis/job_types.h"

namespace jobbuf::redis {

// A sidekiq queue's options (see sidekiq_target.cpp).
struct SidekiqOptions {
    std::string sidekiq_queue;     // the Sidekiq queue name
    std::string namespace_prefix;  // "" or "<ns>:"
    int sidekiq_version = 7;
    std::string group_class;  // delivery 'group': the job class given [group_id]
};

// The Sidekiq JSON of job in two parts: *head (jobbuf's fields spliced after the payload's "{";
// replaced, not appended to) and the returned tail, a view of the rest of the payload. Sending
// head then tail is the job; the payload itself is never copied. May throw std::bad_alloc.
std::string_view sidekiq_job_head(const SidekiqOptions& target, const StagedJob& job, bool immediate, double now_epoch,
                                  std::string* head);

// At least as long as any head sidekiq_job_head writes for target (a cheap size check).
std::size_t sidekiq_head_bound(const SidekiqOptions& target);

// Appends the Sidekiq JSON of job to *out (head then tail). immediate: pushed to the queue now (gets
// enqueued_at = now_epoch); otherwise scheduled. Timestamps are float epoch seconds for
// sidekiq_version 6/7 and integer epoch milliseconds for 8 and later. A payload that is not a
// JSON object text is appended unchanged (the Postgres side only stages objects).
// May throw std::bad_alloc.
void append_sidekiq_job(const SidekiqOptions& target, const StagedJob& job, bool immediate, double now_epoch,
                        std::string* out);

}  // namespace jobbuf::redis
