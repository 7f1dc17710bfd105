// Pure C++ regime: QueueTarget, what one kind of target does with a batch: its keys and options,
// how each job becomes a bulk string, the pushes of a unit, and the message of a claimed group.
// Each target is one file beside this one; target_registry.cpp is the list of them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis/delivery_plan.h"
#include "redis/job_types.h"
#include "redis/reply.h"

namespace jobbuf::redis {

class QueueTarget {
public:
    virtual ~QueueTarget() = default;

    virtual TargetKind kind() const = 0;
    virtual const TargetTraits& traits() const = 0;

    // The keys its units write (a Redis Cluster serves a unit only when they share one hash slot).
    virtual std::vector<std::string> written_keys() const = 0;

    // At least as many bytes as any job's bulk string carries beyond its payload: lets the size
    // check skip the exact size (bulk_size) for jobs far below the limit.
    virtual std::size_t bulk_overhead_bound() const { return 0; }

    // The size of the bulk string job becomes (immediate: pushed now rather than scheduled);
    // scratch is the caller's buffer.
    virtual std::size_t bulk_size(const StagedJob& job, bool immediate, double now_epoch, std::string* scratch) const
    {
        return job.payload.size();
    }

    // Appends the unit's pushes (the commands between MULTI and the marker) to plan->unit and
    // their job ranges to plan->pushes, for the jobs not skipped, in id order. May throw
    // std::bad_alloc.
    virtual void plan_pushes(const std::vector<StagedJob>& jobs, const SkippedJobs& skip, double now_epoch,
                             DeliveryPlan* plan) const = 0;

    // The depth max_in_redis caps: how many of the queue's jobs wait in Redis for a consumer, read
    // the way that consumer counts its waiting work. add_depth_reads appends the commands (each
    // answered with an integer by default: LLEN, ZCARD), depth_from reads their replies.
    virtual void add_depth_reads(CommandPipeline* pipeline) const = 0;
    virtual std::size_t depth_read_count() const { return 1; }
    virtual bool depth_from(const RedisReply* replies, long long* depth, std::string* error) const;

    // The queue option max_in_redis (0: no cap), set by make_queue_target. A capped queue pushes
    // only due jobs, as immediate ones: its target's own schedule (Sidekiq's, BullMQ's delayed
    // set) would hold jobs the cap does not count.
    long long max_in_redis() const { return max_in_redis_; }
    void set_max_in_redis(long long cap);  // may throw std::bad_alloc
    // Names what the depth reads read (a hash of their commands): capped queues that deliver into
    // the same keys (a shared sidekiq_queue, celery_queue or key) have the same depth.
    std::uint64_t depth_identity() const { return depth_identity_; }
    // The queue option max_rate, jobs per second (0: no limit), set by make_queue_target.
    double max_rate() const { return max_rate_; }
    void set_max_rate(double rate) { max_rate_ = rate; }
    const TargetTraits& effective_traits() const { return max_in_redis_ > 0 ? capped_traits_ : traits(); }

    // The payload of the one message that stands for a claimed group (delivery 'group'):
    // by default {"ids": [<job ids>], "group_id": "<uuid>"}, as jsonb prints it.
    virtual void append_group_payload(std::string_view group_id, const std::int64_t* ids, std::size_t count,
                                      std::string* out) const;

private:
    long long max_in_redis_ = 0;
    std::uint64_t depth_identity_ = 0;
    double max_rate_ = 0;
    TargetTraits capped_traits_;
};

// Appends a push that Redis answers with the error `why` for job (a payload the target cannot
// encode, such as one staged before its queue's delivery changed from group to each): the job
// goes to dead letters like any job Redis refused, without taking the rest of the batch along.
void plan_refusal(std::size_t job, std::string_view why, DeliveryPlan* plan);

// The job's stable identity as consumers see it (Sidekiq's jid, the stream field uid): 24 lowercase
// hex characters, 8 of its id salt (the installation it was staged under), then 16 of its id.
void append_job_uid(const StagedJob& job, std::string* out);

// The group message of a target that hands the group id to a named job, as jsonb prints it:
// {"<id_key>": <open>"<group id>"<close>, "<name_key>": "<name>"} (id_key sorts before name_key).
void append_named_group_payload(std::string_view id_key, std::string_view open, std::string_view close,
                                std::string_view name_key, std::string_view name, std::string_view group_id,
                                std::string* out);

// What a target is made from: its queue's name and options. (The ids a target derives from a job,
// such as Sidekiq's jid, come from the job itself: StagedJob::id_salt and id.)
struct TargetSetup {
    std::string_view queue;
    const TargetOption* options = nullptr;
    std::size_t option_count = 0;

    // The option's text, or fallback when the queue does not set it.
    std::string_view option(std::string_view name, std::string_view fallback) const;
    // The option as an integer in [min, max], or fallback when unset; false (with *error) when
    // it is set to anything else.
    bool integer_option(std::string_view name, long long fallback, long long min, long long max, long long* out,
                        std::string* error) const;
};

}  // namespace jobbuf::redis
