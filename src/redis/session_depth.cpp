// Pure C++ regime: the drain session's depth reads for queues with max_in_redis (SPEC 1.3, "Flow
// control at the drain": Depth cap): how many of a queue's jobs wait in Redis, read with the
// target's own commands (targets/queue_target.h) on the node that serves its keys; the depths of
// every queue of a pass in one round trip (one per Cluster master).
#include "redis/regime.h"

#include <map>
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

SessionReport drain_session_depths(DrainSession* session, IoWaiter& waiter, const QueueTarget* const* targets,
                                   std::size_t count, long long* depths, bool* read) noexcept
{
    try {
        for (std::size_t i = 0; i < count; ++i)
            read[i] = false;
        // The targets by the node that serves them (a single server: one group). On a cluster whose
        // map is not known yet, by hash slot: the first round trip asks for the map.
        std::map<long, std::vector<std::size_t>> groups;
        for (std::size_t i = 0; i < count; ++i) {
            long group = 0;
            if (session->is_cluster()) {
                std::string why;
                int hash_slot = target_hash_slot(*targets[i], &why);
                if (hash_slot < 0)
                    continue;  // refused: its batch says why
                const SlotMap& map = session->cluster.map;
                int owner = map.known() ? map.owner[static_cast<std::size_t>(hash_slot)] : -1;
                group = owner >= 0 ? owner : -1 - static_cast<long>(hash_slot);
            }
            groups[group].push_back(i);
        }
        for (const auto& [group, members] : groups) {
            CommandPipeline pipeline;
            for (std::size_t i : members)
                targets[i]->add_depth_reads(&pipeline);
            std::string why;
            int hash_slot = session->is_cluster() ? target_hash_slot(*targets[members.front()], &why) : -1;
            std::vector<RedisReply> replies;
            RedisStatus status = session_round_trip(session, hash_slot, pipeline, &replies, session->timeout_ms, waiter);
            if (!status.ok())
                return report_failure(status, "reading queues' depths in Redis");
            // A reply that is not a depth (a redirection to another master, an error) leaves its
            // queue unread: its own read follows the redirection or reports the error.
            std::size_t at = 0;
            for (std::size_t i : members) {
                std::size_t n = targets[i]->depth_read_count();
                std::string error;
                if (at + n <= replies.size())
                    read[i] = targets[i]->depth_from(replies.data() + at, &depths[i], &error);
                at += n;
            }
        }
        return {};
    } catch (...) {
        return out_of_memory();
    }
}

}  // namespace jobbuf::redis
