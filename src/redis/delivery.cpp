// One batch of staged jobs as one atomic Redis unit: MULTI, the pushes of the queue's target
// (targets/), SET <marker> <ids>, EXEC; and the per-job outcome read back from
// the replies. Pure C++ regime: the entry points are noexcept and report through their result.
#include "redis/regime.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "redis/delivery.h"

namespace jobbuf::redis {
namespace {

std::string decimal(long long v)
{
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, res.ptr);
}

// Marks the jobs Redis would refuse for their size (plan->oversized); the target skips them.
// The exact size is computed only for jobs near the limit.
void find_oversized(const QueueTarget& target, const std::vector<StagedJob>& jobs, double now_epoch, DeliveryPlan* plan,
                    SkippedJobs* skip)
{
    const std::size_t overhead = target.bulk_overhead_bound();
    std::string scratch;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        if (jobs[i].known_too_large == 0 && jobs[i].payload.size() + overhead <= plan->max_bulk_bytes)
            continue;
        std::size_t bytes = jobs[i].known_too_large > 0
                                ? jobs[i].known_too_large
                                : target.bulk_size(jobs[i], jobs[i].run_at <= now_epoch, now_epoch, &scratch);
        if (bytes <= plan->max_bulk_bytes)
            continue;
        if (skip->empty())
            skip->assign(jobs.size(), 0);
        (*skip)[i] = 1;
        plan->oversized.push_back(DeliveryPlan::Oversized{i, bytes, jobs[i].known_too_large > 0});
    }
}

void set_error(std::string* error, const std::string& a, const std::string& b = std::string()) noexcept
{
    try {
        *error = a + b;
        for (char& c : *error)
            if (c == '\r' || c == '\n')
                c = ' ';
    } catch (...) {
        error->clear();
    }
}

// Marks one job as failed by a command's error reply. Retry wins over Rejected: a job that
// met a transient error stays staged rather than going to dead letters.
void record_failure(JobOutcome* outcome, const std::string& error_text)
{
    if (outcome->result == JobResult::TooLarge)
        return;  // never sent
    const bool transient = is_transient_error(error_text);
    if (outcome->result == JobResult::Retry)
        return;
    if (outcome->result == JobResult::Rejected && !transient)
        return;
    outcome->result = transient ? JobResult::Retry : JobResult::Rejected;
    outcome->error = error_text;
}

}  // namespace

bool plan_delivery(const QueueTarget& target, const std::vector<StagedJob>& jobs, std::string_view marker_key,
                   double now_epoch, DeliveryPlan* plan, std::string* error, std::size_t max_bulk_bytes,
                   const MarkerStamp* stamp) noexcept
{
    try {
        plan->unit.clear();
        plan->pushes.clear();
        plan->oversized.clear();
        plan->max_bulk_bytes = max_bulk_bytes;
        SkippedJobs skip;
        find_oversized(target, jobs, now_epoch, plan, &skip);
        plan->unit.add({"MULTI"});
        target.plan_pushes(jobs, skip, now_epoch, plan);
        std::vector<std::int64_t> ids;
        std::vector<double> staged;
        ids.reserve(jobs.size());
        staged.reserve(jobs.size());
        for (std::size_t i = 0; i < jobs.size(); ++i)
            if (jobs[i].marked && is_sent(skip, i)) {
                ids.push_back(jobs[i].id);
                staged.push_back(jobs[i].staged_at);
            }
        if (stamp != nullptr)
            plan->unit.add({"SET", marker_key,
                            format_marker_value(stamp->number, marker_digest(ids.data(), staged.data(), ids.size()),
                                                ids, stamp->writer)});
        else
            plan->unit.add({"SET", marker_key, format_marker(ids)});
        plan->unit.add({"EXEC"});
        return true;
    } catch (...) {
        plan->unit.clear();
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
        if (replies.size() != pushes + 3 || replies.size() != plan.unit.command_count()) {
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
        outcomes->assign(job_count, JobOutcome{JobResult::Delivered, std::string()});
        for (const auto& big : plan.oversized) {
            if (big.job >= job_count) {
                set_error(error, "delivery plan does not match the batch's job count");
                outcomes->clear();
                return false;
            }
            JobOutcome& outcome = (*outcomes)[big.job];
            outcome.result = JobResult::TooLarge;
            outcome.error = std::string(big.at_least ? "the job is at least " : "the job is ") +
                            decimal(static_cast<long long>(big.bytes)) +
                            " bytes as sent to Redis, more than Redis accepts (proto-max-bulk-len " +
                            decimal(static_cast<long long>(plan.max_bulk_bytes)) + " bytes); it was not sent";
        }
        for (std::size_t k = 0; k < pushes; ++k) {
            const RedisReply& element = exec.elements[k];
            if (!element.is_error())
                continue;
            for (std::size_t j = plan.pushes[k].first; j < plan.pushes[k].last; ++j)
                record_failure(&(*outcomes)[j], element.str);
        }
        // The pushes ran: their outcomes stand. A failed marker SET only weakens the
        // effectively-once guarantee for this batch; say so without failing the batch.
        if (exec.elements.back().is_error())
            set_error(error, "batch marker not recorded: ", exec.elements.back().str);
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
        if (i != 0)
            out.push_back(',');
        auto res = std::to_chars(buf, buf + sizeof buf, ids[i]);
        out.append(buf, res.ptr);
    }
    return out;
}

std::uint64_t marker_digest(const std::int64_t* ids, const double* staged_at, std::size_t count) noexcept
{
    // The sum of one FNV-1a hash per job: the same for the jobs in any order (a fair_by batch is
    // pushed partition by partition; a later start reads the jobs back in id order).
    auto fnv = [](std::uint64_t hash, std::uint64_t v) {
        for (int b = 0; b < 8; ++b) {
            hash ^= (v >> (8 * b)) & 0xff;
            hash *= 0x100000001b3ULL;
        }
        return hash;
    };
    std::uint64_t sum = fnv(0xcbf29ce484222325ULL, count);
    // staged_at to the microsecond, as PostgreSQL keeps it: the take's two paths and the check
    // of a later start convert a timestamp to epoch seconds in ways that may differ in the last bit.
    for (std::size_t i = 0; i < count; ++i)
        sum += fnv(fnv(0xcbf29ce484222325ULL, static_cast<std::uint64_t>(ids[i])),
                   static_cast<std::uint64_t>(std::llround(staged_at[i] * 1e6)));
    return sum;
}

std::string format_marker_value(std::int64_t number, std::uint64_t digest, const std::vector<std::int64_t>& ids,
                                std::string_view writer)
{
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(digest));
    std::string out = "2;" + decimal(number) + ";" + hex + ";" + format_marker(ids) + ";";
    out.append(writer.data(), writer.size());
    return out;
}

bool parse_marker_value(std::string_view text, MarkerValue* value) noexcept
{
    try {
        *value = MarkerValue();
        if (text.rfind("2;", 0) != 0) {
            value->legacy = true;
            return parse_marker(text, &value->ids);
        }
        value->legacy = false;
        std::size_t a = 2, b = text.find(';', a);
        if (b == std::string_view::npos || b == a)
            return false;
        auto res = std::from_chars(text.data() + a, text.data() + b, value->number);
        if (res.ec != std::errc() || res.ptr != text.data() + b || value->number < 0)
            return false;
        std::size_t c = text.find(';', b + 1);
        if (c == std::string_view::npos || c != b + 17)
            return false;
        unsigned long long digest = 0;
        res = std::from_chars(text.data() + b + 1, text.data() + c, digest, 16);
        if (res.ec != std::errc() || res.ptr != text.data() + c)
            return false;
        value->digest = digest;
        std::size_t d = text.find(';', c + 1);
        if (d == std::string_view::npos || !parse_marker(text.substr(c + 1, d - c - 1), &value->ids))
            return false;
        value->writer = std::string(text.substr(d + 1));
        return true;
    } catch (...) {
        return false;
    }
}

bool parse_marker(std::string_view text, std::vector<std::int64_t>* ids) noexcept
{
    try {
        ids->clear();
        if (text.empty())
            return true;
        std::size_t start = 0;
        for (;;) {
            std::size_t comma = text.find(',', start);
            std::string_view item =
                text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
            if (item.empty())
                return false;
            for (char c : item)
                if (c < '0' || c > '9')
                    return false;
            std::int64_t v = 0;
            auto res = std::from_chars(item.data(), item.data() + item.size(), v);
            if (res.ec != std::errc() || res.ptr != item.data() + item.size())
                return false;
            ids->push_back(v);
            if (comma == std::string_view::npos)
                return true;
            start = comma + 1;
        }
    } catch (...) {
        ids->clear();
        return false;
    }
}

}  // namespace jobbuf::redis
