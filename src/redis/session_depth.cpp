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
        // A reply that is not a depth (an error, a cluster's MOVED or ASK) leaves its target unread:
        // its own read (drain_session_depth) follows the redirection or reports the error.
        auto take = [&](const std::vector<std::size_t>& members, const std::vector<RedisReply>& replies) {
            std::size_t at = 0;
            for (std::size_t i : members) {
                std::size_t n = targets[i]->depth_read_count();
                std::string error;
                if (at + n <= replies.size())
                    read[i] = targets[i]->depth_from(replies.data() + at, &depths[i], &error);
                at += n;
            }
        };
        if (!session->is_cluster()) {
            std::vector<std::size_t> members(count);
            CommandPipeline pipeline;
            for (std::size_t i = 0; i < count; ++i) {
                members[i] = i;
                targets[i]->add_depth_reads(&pipeline);
            }
            std::vector<RedisReply> replies;
            RedisStatus status = session_round_trip(session, -1, pipeline, &replies, session->timeout_ms, waiter);
            if (!status.ok())
                return report_failure(status, "reading queues' depths in Redis");
            take(members, replies);
            return {};
        }
        // A Cluster: one round trip per master, as the slot map last read says; the targets of a
        // slot no master serves (or before the map is known) are left unread. A master that fails
        // leaves its targets unread (and its link closed) without ending the others' reads.
        const SlotMap& map = session->cluster.map;
        if (!map.known())
            return {};
        std::map<int, std::vector<std::size_t>> by_master;
        for (std::size_t i = 0; i < count; ++i) {
            std::string why;
            int hash_slot = target_hash_slot(*targets[i], &why);
            int owner = hash_slot < 0 ? -1 : map.owner[static_cast<std::size_t>(hash_slot)];
            if (owner >= 0)
                by_master[owner].push_back(i);
        }
        for (const auto& [owner, members] : by_master) {
            CommandPipeline pipeline;
            for (std::size_t i : members)
                targets[i]->add_depth_reads(&pipeline);
            std::vector<RedisReply> replies;
            RedisStatus status = node_round_trip(session->cluster, owner, pipeline, &replies, session->timeout_ms,
                                                 session->timeout_ms, waiter);
            if (status.code == RedisStatus::Code::Interrupted)
                return report_failure(status, "reading queues' depths in Redis");
            if (status.ok())
                take(members, replies);
        }
        return {};
    } catch (...) {
        return out_of_memory();
    }
}

}  // namespace jobbuf::redis
