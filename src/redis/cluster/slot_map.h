// Pure C++ regime: a Redis Cluster's slot map as the cluster describes it (CLUSTER SHARDS, or
// CLUSTER SLOTS on servers before 7.0), and the redirections a node answers with (MOVED, ASK,
// TRYAGAIN, CLUSTERDOWN). Parsing only: cluster_links.h asks the nodes.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "redis/endpoint.h"
#include "redis/reply.h"

namespace jobbuf::redis {

struct ClusterNode {
    std::string id;                          // the node's id (40 hex digits; empty when the reply did not say)
    HostPort at;                             // where to connect (the TLS port for a TLS endpoint, when known); an
                                             // empty host: the node's address is the one it was asked at
    bool master = false;                     // role: master (serves its shard's slots) or replica
    std::string health;                      // "online", "failed", "loading" ("online" when CLUSTER SLOTS lists it)
    std::vector<std::pair<int, int>> slots;  // its shard's slot ranges, inclusive
    std::string address() const;             // "host:port"
};

struct SlotMap {
    std::vector<ClusterNode> nodes;
    std::vector<int> owner;  // slot -> index of the master in nodes that serves it; -1: none
    bool known() const { return !owner.empty(); }
};

// Fills *map from a CLUSTER SHARDS reply. A shard's slots go to its master that is online (the
// first master listed when none is). tls: use a node's tls-port. False with *error when the
// reply is not what CLUSTER SHARDS returns.
bool parse_cluster_shards(const RedisReply& reply, bool tls, SlotMap* map, std::string* error);

// The same from a CLUSTER SLOTS reply (each range: start, end, master, replicas...).
bool parse_cluster_slots(const RedisReply& reply, SlotMap* map, std::string* error);

struct Redirect {
    enum class Kind { None, Moved, Ask, TryAgain, ClusterDown };
    Kind kind = Kind::None;
    int slot = -1;
    HostPort at;  // Moved, Ask: where the slot is (host empty: the node that answered)
};

// What an error reply asks of the client (Kind::None for any other reply).
Redirect redirect_of(const RedisReply& reply);

}  // namespace jobbuf::redis
