// Pure C++ regime: the nodes of the Redis Cluster that jobbuf.redis_url names, their role, health
// and slot ranges, as plain rows for jobbuf_cluster_nodes() (status/cluster_nodes_function.cpp).
#pragma once
#include <cstddef>

#include "redis/drain_session.h"

namespace jobbuf::redis {

struct ClusterNodeRow {
    char address[272];  // "host:port"
    char id[48];
    char role[8];     // "master" or "replica"
    char health[16];  // "online", "failed", "loading", ...
    int slot_first;   // -1 (and slot_last -1) for a node whose shard has no slot
    int slot_last;
};

// Asks the cluster (the URL's seeds) for its slot map, through connections of its own named
// client_name (never the worker's: the worker's fencing must not meet them). Writes at most
// max_rows rows (one per node and slot range) and their number in *count. BadConfig when the URL
// is not a Redis Cluster.
SessionReport cluster_node_rows(const SessionSettings& settings, IoWaiter& waiter, ClusterNodeRow* rows,
                                std::size_t max_rows, std::size_t* count) noexcept;

}  // namespace jobbuf::redis
