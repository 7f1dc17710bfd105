// Pure C++ regime: the drain session's depth reads for queues with max_in_redis (SPEC 1.3, "Flow
// control at the drain": Depth cap): how many of a queue's jobs wait in Redis, read with the
// target's own commands (targets/queue_target.h) on the node that serves its keys.
#include "redis/regime.h"

#include <string>

#include "redis/drain_session.h"
#include "redis/session_state.h"
#include "redis/targets/queue_target.h"

namespace jobbuf::redis {

SessionReport drain_session_depth(DrainSession* session, IoWaiter& waiter, const QueueTarget* target,
                                  long long* depth) noexcept
{
    try {
        int hash_slot = -1;
        if (session->is_cluster()) {
            std::string why;
            hash_slot = target_hash_slot(*target, &why);
            if (hash_slot < 0)
                return report_of(SessionReport::Status::Refused, why);
        }
        CommandPipeline pipeline;
        target->add_depth_reads(&pipeline);
        std::vector<RedisReply> replies;
        RedisStatus status = session_round_trip(session, hash_slot, pipeline, &replies, session->timeout_ms, waiter);
        if (!status.ok())
            return report_failure(status, "reading a queue's depth in Redis");
        if (replies.size() < target->depth_read_count())
            return report_of(SessionReport::Status::Refused, "reading a queue's depth in Redis: too few replies");
        std::string error;
        if (!target->depth_from(replies.data(), depth, &error))
            return report_of(SessionReport::Status::Refused, "reading a queue's depth in Redis: " + error);
        return {};
    } catch (...) {
        return out_of_memory();
    }
}

}  // namespace jobbuf::redis
