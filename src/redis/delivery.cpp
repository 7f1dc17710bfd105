// One batch of staged jobs as one atomic Redis unit: MULTI, the pushes of the queue's target
// (list, stream or Sidekiq), SET <marker> <ids>, EXEC; and the per-job outcome read back from
// the replies. Pure C++ regime: the entry points are noexcept and report through their result.
#include "redis/regime.h"

#include <charconv>
#include <string>

#include "redis/delivery.h"
#include "redis/json_text.h"
#include "redis/sidekiq_job.h"

namespace jobbuf::redis {
namespace {

using Range = DeliveryPlan::PushRange;

std::string decimal(long long v)
{
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, res.ptr);
}

// The bulk string a job becomes: its payload for lists and streams, its Sidekiq JSON.
std::size_t bulk_size(const QueueTarget& target, const StagedJob& job, bool immediate, double now_epoch,
                      std::string* scratch)
{
    if (target.kind != QueueTarget::Kind::Sidekiq) return job.payload.size();
    std::string_view tail = sidekiq_job_head(target, job, immediate, now_epoch, scratch);
    return scratch->size() + tail.size();
}

// Marks the jobs Redis would refuse for their size (plan->oversized); the planners skip them.
// The exact Sidekiq size is computed only for jobs near the limit.
void find_oversized(const QueueTarget& target, const std::vector<StagedJob>& jobs, double now_epoch,
                    DeliveryPlan* plan, std::vector<char>* skip)
{
    const std::size_t head_bound = target.kind == QueueTarget::Kind::Sidekiq ? sidekiq_head_bound(target) : 0;
    std::string scratch;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        if (jobs[i].known_too_large == 0 && jobs[i].payload.size() + head_bound <= plan->max_bulk_bytes) continue;
        std::size_t bytes = jobs[i].known_too_large > 0
                                ? jobs[i].known_too_large
                                : bulk_size(target, jobs[i], jobs[i].run_at <= now_epoch, now_epoch, &scratch);
        if (bytes <= plan->max_bulk_bytes) continue;
        if (skip->empty()) skip->assign(jobs.size(), 0);
        (*skip)[i] = 1;
        plan->oversized.push_back(DeliveryPlan::Oversized{i, bytes, jobs[i].known_too_large > 0});
    }
}

std::size_t count_sent(const std::vector<char>& skip, std::size_t first, std::size_t last)
{
    std::size_t n = last - first;
    if (!skip.empty())
        for (std::size_t i = first; i < last; ++i) n -= skip[i] ? 1 : 0;
    return n;
}

bool sent(const std::vector<char>& skip, std::size_t i)
{
    return skip.empty() || !skip[i];
}

// RPUSH key p1 ... pn: one command carries the whole batch, in id order.
void plan_list(const QueueTarget& target, const std::vector<StagedJob>& jobs, const std::vector<char>& skip,
               DeliveryPlan* plan)
{
    std::size_t n = count_sent(skip, 0, jobs.size());
    if (n == 0) return;
    CommandBatch& b = plan->batch;
    b.begin(2 + n);
    b.arg("RPUSH");
    b.arg(target.key);
    for (std::size_t i = 0; i < jobs.size(); ++i)
        if (sent(skip, i)) b.arg(jobs[i].payload);
    plan->pushes.push_back(Range{0, jobs.size()});
}

// XADD key [MAXLEN ~ n] * id <id> payload <json>: one command per job, so that one refused
// entry does not take the others down with it.
void plan_stream(const QueueTarget& target, const std::vector<StagedJob>& jobs, const std::vector<char>& skip,
                 DeliveryPlan* plan)
{
    CommandBatch& b = plan->batch;
    std::string maxlen = target.maxlen > 0 ? decimal(target.maxlen) : std::string();
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        if (!sent(skip, i)) continue;
        std::string id = decimal(jobs[i].id);
        if (target.maxlen > 0)
            b.add({"XADD", target.key, "MAXLEN", "~", maxlen, "*", "id", id, "payload", jobs[i].payload});
        else
            b.add({"XADD", target.key, "*", "id", id, "payload", jobs[i].payload});
        plan->pushes.push_back(Range{i, i + 1});
    }
}

// Each maximal run of consecutive immediate jobs becomes SADD <ns>queues <q> plus one
// LPUSH <ns>queue:<q> j1 ... jn (Sidekiq pops from the right: j1 runs first), both carrying the
// run; each run of scheduled jobs becomes one ZADD <ns>schedule <run_at> <job> ... . Runs keep
// the id order without needing a job-index indirection; a batch that is all immediate (the usual
// case) is exactly one SADD and one LPUSH. Each job is sent as its head and its payload's tail
// (sidekiq_job.h), so a large payload is not copied.
void plan_sidekiq(const QueueTarget& target, const std::vector<StagedJob>& jobs, const std::vector<char>& skip,
                  double now_epoch, DeliveryPlan* plan)
{
    CommandBatch& b = plan->batch;
    const std::string queues_key = target.namespace_prefix + "queues";
    const std::string queue_key = target.namespace_prefix + "queue:" + target.sidekiq_queue;
    const std::string schedule_key = target.namespace_prefix + "schedule";
    std::string head, score;
    std::size_t i = 0;
    while (i < jobs.size()) {
        const bool immediate = jobs[i].run_at <= now_epoch;
        std::size_t end = i;
        while (end < jobs.size() && (jobs[end].run_at <= now_epoch) == immediate) ++end;
        const std::size_t n = count_sent(skip, i, end);
        if (n > 0 && immediate) {
            b.add({"SADD", queues_key, target.sidekiq_queue});
            plan->pushes.push_back(Range{i, end});
            b.begin(2 + n);
            b.arg("LPUSH");
            b.arg(queue_key);
        } else if (n > 0) {
            b.begin(2 + 2 * n);
            b.arg("ZADD");
            b.arg(schedule_key);
        }
        for (std::size_t j = i; j < end && n > 0; ++j) {
            if (!sent(skip, j)) continue;
            if (!immediate) {
                score.clear();
                append_epoch_seconds(jobs[j].run_at, &score);
                b.arg(score);
            }
            std::string_view tail = sidekiq_job_head(target, jobs[j], immediate, now_epoch, &head);
            b.arg(head, tail);
        }
        if (n > 0) plan->pushes.push_back(Range{i, end});
        i = end;
    }
}

void set_error(std::string* error, const std::string& a, const std::string& b = std::string()) noexcept
{
    try {
        *error = a + b;
        for (char& c : *error)
            if (c == '\r' || c == '\n') c = ' ';
    } catch (...) {
        error->clear();
    }
}

// Marks one job as failed by a command's error reply. Retry wins over Rejected: a job that
// met a transient error stays staged rather than going to dead letters.
void record_failure(JobOutcome* outcome, const std::string& error_text)
{
    if (outcome->kind == JobOutcome::Kind::TooLarge) return;  // never sent
    const bool transient = is_transient_error(error_text);
    if (outcome->kind == JobOutcome::Kind::Retry) return;
    if (outcome->kind == JobOutcome::Kind::Rejected && !transient) return;
    outcome->kind = transient ? JobOutcome::Kind::Retry : JobOutcome::Kind::Rejected;
    outcome->error = error_text;
}

}  // namespace

bool plan_delivery(const QueueTarget& target, const std::vector<StagedJob>& jobs, std::string_view marker_key,
                   double now_epoch, DeliveryPlan* plan, std::string* error, std::size_t max_bulk_bytes) noexcept
{
    try {
        plan->batch.clear();
        plan->pushes.clear();
        plan->oversized.clear();
        plan->max_bulk_bytes = max_bulk_bytes;
        std::vector<char> skip;  // empty, or 1 for each job left out
        find_oversized(target, jobs, now_epoch, plan, &skip);
        plan->batch.add({"MULTI"});
        switch (target.kind) {
        case QueueTarget::Kind::List: plan_list(target, jobs, skip, plan); break;
        case QueueTarget::Kind::Stream: plan_stream(target, jobs, skip, plan); break;
        case QueueTarget::Kind::Sidekiq: plan_sidekiq(target, jobs, skip, now_epoch, plan); break;
        }
        std::vector<std::int64_t> ids;
        ids.reserve(jobs.size());
        for (std::size_t i = 0; i < jobs.size(); ++i)
            if (jobs[i].marked && sent(skip, i)) ids.push_back(jobs[i].id);
        plan->batch.add({"SET", marker_key, format_marker(ids)});
        plan->batch.add({"EXEC"});
        return true;
    } catch (...) {
        plan->batch.clear();
        plan->pushes.clear();
        set_error(error, "out of memory while building the Redis batch");
        return false;
    }
}

bool read_delivery(const DeliveryPlan& plan, const std::vector<RedisReply>& replies, std::size_t job_count,
                   std::vector<JobOutcome>* outcomes, std::string* error) noexcept
{
    try {
        error->clear();
        outcomes->clear();
        const std::size_t pushes = plan.pushes.size();
        if (replies.size() != pushes + 3 || replies.size() != plan.batch.command_count()) {
            set_error(error, "malformed Redis transaction replies: unexpected reply count");
            return false;
        }
        if (replies.front().is_error()) {
            set_error(error, "MULTI refused: ", replies.front().str);
            return false;
        }
        const RedisReply& exec = replies.back();
        for (std::size_t i = 1; i + 1 < replies.size(); ++i) {
            if (replies[i].is_error()) {
                std::string head = exec.is_error() ? exec.str : std::string("EXEC did not run");
                set_error(error, head, " (first error: " + replies[i].str + ")");
                return false;
            }
        }
        if (exec.is_error()) {
            set_error(error, "EXEC failed: ", exec.str);
            return false;
        }
        if (exec.type == RedisReply::Type::Nil) {
            set_error(error, "EXEC returned nil: the transaction was aborted");
            return false;
        }
        if (exec.type != RedisReply::Type::Array || exec.elements.size() != pushes + 1) {
            set_error(error, "malformed Redis transaction replies: unexpected EXEC reply");
            return false;
        }
        for (const auto& range : plan.pushes) {
            if (range.first > range.last || range.last > job_count) {
                set_error(error, "delivery plan does not match the batch's job count");
                return false;
            }
        }
        outcomes->assign(job_count, JobOutcome{JobOutcome::Kind::Delivered, std::string()});
        for (const auto& big : plan.oversized) {
            if (big.job >= job_count) {
                set_error(error, "delivery plan does not match the batch's job count");
                outcomes->clear();
                return false;
            }
            JobOutcome& outcome = (*outcomes)[big.job];
            outcome.kind = JobOutcome::Kind::TooLarge;
            outcome.error = std::string(big.at_least ? "the job is at least " : "the job is ") +
                            decimal(static_cast<long long>(big.bytes)) +
                            " bytes as sent to Redis, more than Redis accepts (proto-max-bulk-len " +
                            decimal(static_cast<long long>(plan.max_bulk_bytes)) + " bytes); it was not sent";
        }
        for (std::size_t k = 0; k < pushes; ++k) {
            const RedisReply& element = exec.elements[k];
            if (!element.is_error()) continue;
            for (std::size_t j = plan.pushes[k].first; j < plan.pushes[k].last; ++j)
                record_failure(&(*outcomes)[j], element.str);
        }
        // The pushes ran: their outcomes stand. A failed marker SET only weakens the
        // effectively-once guarantee for this batch; say so without failing the batch.
        if (exec.elements.back().is_error()) set_error(error, "batch marker not recorded: ", exec.elements.back().str);
        return true;
    } catch (...) {
        outcomes->clear();
        set_error(error, "out of memory while reading the Redis transaction replies");
        return false;
    }
}

std::string format_marker(const std::vector<std::int64_t>& ids)
{
    std::string out;
    out.reserve(ids.size() * 8);
    char buf[24];
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (i != 0) out.push_back(',');
        auto res = std::to_chars(buf, buf + sizeof buf, ids[i]);
        out.append(buf, res.ptr);
    }
    return out;
}

bool parse_marker(std::string_view text, std::vector<std::int64_t>* ids) noexcept
{
    try {
        ids->clear();
        if (text.empty()) return true;
        std::size_t start = 0;
        for (;;) {
            std::size_t comma = text.find(',', start);
            std::string_view item = text.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                                                         : comma - start);
            if (item.empty()) return false;
            for (char c : item)
                if (c < '0' || c > '9') return false;
            std::int64_t v = 0;
            auto res = std::from_chars(item.data(), item.data() + item.size(), v);
            if (res.ec != std::errc() || res.ptr != item.data() + item.size()) return false;
            ids->push_back(v);
            if (comma == std::string_view::npos) return true;
            start = comma + 1;
        }
    } catch (...) {
        ids->clear();
        return false;
    }
}

}  // namespace jobbuf::redis
