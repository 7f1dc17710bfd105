// Pure C++ regime: the Redis Cluster's nodes and slots for inspection (see cluster_inspection.h).
#include "redis/regime.h"

#include <cstdio>

#include "redis/cluster/cluster_inspection.h"
#include "redis/session_state.h"

namespace jobbuf::redis {

SessionReport cluster_node_rows(const SessionSettings& settings, IoWaiter& waiter, ClusterNodeRow* rows,
                                std::size_t max_rows, std::size_t* count) noexcept
{
    *count = 0;
    try {
        DrainSession session;
        SessionReport report = drain_session_configure(&session, settings);
        if (report.status != SessionReport::Status::Ok)
            return report;
        if (!session.is_cluster())
            return report_of(SessionReport::Status::BadConfig,
                             "jobbuf.redis_url is not a Redis Cluster (redis+cluster://)");
        RedisStatus status = refresh_slot_map(session.cluster, session.timeout_ms, waiter);
        if (!status.ok())
            return report_failure(status, "asking the Redis Cluster for its slot map");
        for (const ClusterNode& node : session.cluster.map.nodes) {
            std::size_t ranges = node.slots.empty() ? 1 : node.slots.size();
            for (std::size_t r = 0; r < ranges && *count < max_rows; ++r) {
                ClusterNodeRow& row = rows[(*count)++];
                std::snprintf(row.address, sizeof(row.address), "%s", node.address().c_str());
                std::snprintf(row.id, sizeof(row.id), "%s", node.id.c_str());
                std::snprintf(row.role, sizeof(row.role), "%s", node.master ? "master" : "replica");
                std::snprintf(row.health, sizeof(row.health), "%s", node.health.c_str());
                row.slot_first = node.slots.empty() ? -1 : node.slots[r].first;
                row.slot_last = node.slots.empty() ? -1 : node.slots[r].second;
            }
        }
        return {};
    } catch (...) {
        return out_of_memory();
    }
}

}  // namespace jobbuf::redis
