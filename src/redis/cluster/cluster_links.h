// Pure C++ regime: the worker's connections to a Redis Cluster: one link per node it talks to
// (each fenced like a single server's connection, connection_fence.h, once the delivery lease is
// taken: links opened before that, to ask for the map and take the lease, are fenced by
// fence_open_links), the slot map asked of the
// cluster (slot_map.h), and round trips addressed to a slot that follow the cluster's
// redirections: MOVED (the map is asked again), ASK (ASKING, then the unit, on the importing
// node), TRYAGAIN (a short pause, then again). A redirected unit never ran, so sending it again
// cannot duplicate it; a round trip cut off midway is reported as in doubt.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "redis/cluster/slot_map.h"
#include "redis/connection.h"

namespace jobbuf::redis {

struct ClusterLinks {
    RedisEndpoint node_template;  // credentials and TLS of every node (kind Tcp)
    std::vector<HostPort> seeds;
    std::string client_name;                                        // names (and fences) the links
    std::string fencing_warning;                                    // set when a node refused the CLIENT commands
    SlotMap map;                                                    // empty until asked, and again after a failure
    std::map<std::string, std::unique_ptr<RedisConnection>> links;  // by "host:port"
    // False while connecting, until the delivery lease is taken (session_lease.cpp): a link
    // opened then is not fenced, so that a clone whose lease is held elsewhere kills no
    // connection of its original. forget() sets it again.
    bool fence_new_links = true;

    void close_all() noexcept;
    // Forgets the map and every link: the next round trip asks the cluster again (a failover).
    void forget() noexcept;
};

// Fences every open link (opened while fence_new_links was false) and fences the links opened
// from now on. A failure forgets the links and the map.
RedisStatus fence_open_links(ClusterLinks& cluster, long timeout_ms, IoWaiter& waiter) noexcept;

// Asks the cluster for its slot map (CLUSTER SHARDS, CLUSTER SLOTS when that is unknown): the
// nodes already linked first, then the nodes of the last map, then the seeds.
RedisStatus refresh_slot_map(ClusterLinks& cluster, long timeout_ms, IoWaiter& waiter) noexcept;

// The link to a node, opened (and fenced) if need be.
RedisStatus node_link(ClusterLinks& cluster, const HostPort& at, long timeout_ms, IoWaiter& waiter,
                      RedisConnection** link) noexcept;

// How a slot round trip ended when it did not succeed.
struct SlotTrip {
    bool in_doubt = false;      // the unit may have run (connection lost or interrupted mid-way)
    bool cluster_down = false;  // the cluster answered CLUSTERDOWN (nothing ran)
    std::string node;           // the node last asked ("host:port")
};

// Sends pipeline (then `then`, in the same round trip) to the node serving slot and reads the
// replies, following MOVED, ASK and TRYAGAIN. io_timeout_ms bounds each round trip,
// timeout_ms each connect.
RedisStatus slot_round_trip(ClusterLinks& cluster, int slot, const CommandPipeline& pipeline,
                            const CommandPipeline* then, std::vector<RedisReply>* replies, long timeout_ms,
                            long io_timeout_ms, IoWaiter& waiter, SlotTrip* trip) noexcept;

// Sends pipeline to the master map.nodes[owner] as it is, without following redirections: a
// command for a slot that node no longer serves gets its MOVED or ASK reply back, for the caller
// to handle (reads spread over many slots: depths). A failure closes that node's link only.
RedisStatus node_round_trip(ClusterLinks& cluster, int owner, const CommandPipeline& pipeline,
                            std::vector<RedisReply>* replies, long timeout_ms, long io_timeout_ms,
                            IoWaiter& waiter) noexcept;

}  // namespace jobbuf::redis
