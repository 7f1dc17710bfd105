// Pure C++ regime: links to the nodes of a Redis Cluster and slot-addressed round trips (see
// cluster_links.h).
#include "redis/regime.h"

#include <string>

#include "redis/cluster/cluster_links.h"
#include "redis/cluster/slot_hash.h"
#include "redis/connection_fence.h"
#include "redis/net/io_deadline.h"

namespace jobbuf::redis {
namespace {

using Code = RedisStatus::Code;

// Redirections followed within one round trip before giving up (a migration in progress needs
// two: MOVED or ASK, then the unit; TRYAGAIN waits kTryAgainMs each time).
constexpr int kMaxRedirects = 16;
constexpr long kTryAgainMs = 50;

std::string address_of(const HostPort& at)
{
    ClusterNode node;
    node.at = at;
    return node.address();
}

// The first redirection among the replies (Kind::None when there is none).
Redirect first_redirect(const std::vector<RedisReply>& replies)
{
    for (const RedisReply& reply : replies) {
        Redirect r = redirect_of(reply);
        if (r.kind != Redirect::Kind::None)
            return r;
    }
    return Redirect();
}

RedisStatus ask_slot_map(RedisConnection& link, bool tls, long timeout_ms, IoWaiter& waiter, SlotMap* map)
{
    CommandPipeline shards;
    shards.add({"CLUSTER", "SHARDS"});
    std::vector<RedisReply> replies;
    RedisStatus st = link.execute(shards, &replies, timeout_ms, waiter);
    if (!st.ok())
        return st;
    std::string error;
    if (replies.at(0).is_error() && replies[0].str.rfind("NOAUTH", 0) == 0)
        return RedisStatus::failure(Code::AuthFailed,
                                    "requires a password (" + replies[0].str + "): set jobbuf.redis_password_file");
    if (!replies.at(0).is_error()) {
        if (parse_cluster_shards(replies[0], tls, map, &error))
            return st;
        return io_failure(Code::ProtocolError, error.c_str());
    }
    CommandPipeline slots;  // Redis before 7.0
    slots.add({"CLUSTER", "SLOTS"});
    replies.clear();
    st = link.execute(slots, &replies, timeout_ms, waiter);
    if (!st.ok())
        return st;
    if (replies.at(0).is_error())
        return io_failure(Code::ProtocolError, "CLUSTER SLOTS:", replies[0].str);
    if (!parse_cluster_slots(replies[0], map, &error))
        return io_failure(Code::ProtocolError, error.c_str());
    return st;
}

}  // namespace

void ClusterLinks::close_all() noexcept
{
    links.clear();
}

void ClusterLinks::forget() noexcept
{
    links.clear();
    map = SlotMap();
    fence_new_links = true;
}

RedisStatus node_link(ClusterLinks& cluster, const HostPort& at, long timeout_ms, IoWaiter& waiter,
                      RedisConnection** link) noexcept
{
    try {
        std::string address = address_of(at);
        std::unique_ptr<RedisConnection>& slot = cluster.links[address];
        if (slot && slot->connected()) {
            *link = slot.get();
            return RedisStatus::success();
        }
        slot = std::make_unique<RedisConnection>();
        RedisEndpoint endpoint = cluster.node_template;
        endpoint.host = at.host;
        endpoint.port = at.port;
        RedisStatus st = slot->connect(endpoint, timeout_ms, waiter);
        if (st.ok() && cluster.fence_new_links) {
            std::string warning;
            st = fence_previous_connections(*slot, cluster.client_name, timeout_ms, waiter, &warning);
            if (!warning.empty())
                cluster.fencing_warning = warning;
        }
        if (!st.ok()) {
            cluster.links.erase(address);
            st.message = "Redis Cluster node " + address + ": " + st.message;
            return st;
        }
        *link = slot.get();
        return st;
    } catch (...) {
        return io_failure(Code::ConnectFailed, "out of memory while connecting to a Redis Cluster node");
    }
}

RedisStatus fence_open_links(ClusterLinks& cluster, long timeout_ms, IoWaiter& waiter) noexcept
{
    try {
        cluster.fence_new_links = true;
        for (auto& [address, link] : cluster.links) {
            if (!link || !link->connected())
                continue;
            std::string warning;
            RedisStatus st = fence_previous_connections(*link, cluster.client_name, timeout_ms, waiter, &warning);
            if (!warning.empty())
                cluster.fencing_warning = warning;
            if (!st.ok()) {
                st.message = "Redis Cluster node " + address + ": " + st.message;
                cluster.forget();
                return st;
            }
        }
        return RedisStatus::success();
    } catch (...) {
        cluster.forget();
        return io_failure(Code::ConnectFailed, "out of memory while fencing Redis Cluster links");
    }
}

RedisStatus refresh_slot_map(ClusterLinks& cluster, long timeout_ms, IoWaiter& waiter) noexcept
{
    try {
        std::vector<HostPort> candidates;
        for (auto& [address, link] : cluster.links)
            for (const ClusterNode& node : cluster.map.nodes)
                if (link && link->connected() && node.address() == address)
                    candidates.push_back(node.at);
        for (const ClusterNode& node : cluster.map.nodes)
            if (node.health == "online")
                candidates.push_back(node.at);
        candidates.insert(candidates.end(), cluster.seeds.begin(), cluster.seeds.end());
        std::string tried;
        for (const HostPort& at : candidates) {
            RedisConnection* link = nullptr;
            RedisStatus st = node_link(cluster, at, timeout_ms, waiter, &link);
            if (st.ok()) {
                SlotMap map;
                st = ask_slot_map(*link, cluster.node_template.tls, timeout_ms, waiter, &map);
                if (st.ok() && map.nodes.empty())
                    st = io_failure(Code::ConnectFailed, "knows no node");
                if (st.ok()) {
                    for (ClusterNode& node : map.nodes)
                        if (node.at.host.empty())
                            node.at.host = at.host;
                    cluster.map = std::move(map);
                    return st;
                }
                if (link->connected() && st.code != Code::Interrupted)
                    cluster.links.erase(address_of(at));
                if (st.code == Code::AuthFailed)  // said by the fence once links are fenced
                    st.message = "Redis Cluster node " + address_of(at) + ": " + st.message;
            }
            if (st.code == Code::Interrupted || st.code == Code::AuthFailed)
                return st;
            if (tried.find(address_of(at)) == std::string::npos)
                tried += (tried.empty() ? "" : "; ") + address_of(at) + ": " + st.message;
        }
        return io_failure(Code::ConnectFailed, "Redis Cluster: no node answered with the slot map", tried);
    } catch (...) {
        return io_failure(Code::ConnectFailed, "out of memory while asking for the Redis Cluster slot map");
    }
}

RedisStatus node_round_trip(ClusterLinks& cluster, int owner, const CommandPipeline& pipeline,
                            std::vector<RedisReply>* replies, long timeout_ms, long io_timeout_ms,
                            IoWaiter& waiter) noexcept
{
    try {
        if (owner < 0 || static_cast<std::size_t>(owner) >= cluster.map.nodes.size())
            return io_failure(Code::ConnectFailed, "Redis Cluster: no such node in the slot map");
        HostPort at = cluster.map.nodes[static_cast<std::size_t>(owner)].at;
        RedisConnection* link = nullptr;
        RedisStatus st = node_link(cluster, at, timeout_ms, waiter, &link);
        if (!st.ok())
            return st;
        replies->clear();
        st = link->execute(pipeline, replies, io_timeout_ms, waiter);
        if (!st.ok())
            cluster.links.erase(address_of(at));
        return st;
    } catch (...) {
        return io_failure(Code::ConnectFailed, "out of memory in a round trip to a Redis Cluster node");
    }
}

RedisStatus slot_round_trip(ClusterLinks& cluster, int slot, const CommandPipeline& pipeline,
                            const CommandPipeline* then, std::vector<RedisReply>* replies, long timeout_ms,
                            long io_timeout_ms, IoWaiter& waiter, SlotTrip* trip) noexcept
{
    try {
        *trip = SlotTrip();
        bool asking = false;
        HostPort ask_at;
        bool refreshed = false;
        for (int attempt = 0; attempt < kMaxRedirects; ++attempt) {
            if (!cluster.map.known()) {
                RedisStatus st = refresh_slot_map(cluster, timeout_ms, waiter);
                if (!st.ok())
                    return st;
            }
            HostPort at = ask_at;
            if (!asking) {
                int owner = cluster.map.owner.at(static_cast<std::size_t>(slot));
                if (owner < 0) {
                    trip->cluster_down = true;
                    return io_failure(Code::ConnectFailed,
                                      ("Redis Cluster: no node serves slot " + std::to_string(slot)).c_str());
                }
                at = cluster.map.nodes[static_cast<std::size_t>(owner)].at;
            }
            trip->node = address_of(at);
            RedisConnection* link = nullptr;
            RedisStatus st = node_link(cluster, at, timeout_ms, waiter, &link);
            if (!st.ok()) {
                // Nothing was sent: ask for the map again once (a failover may have moved the slot).
                if (st.code == Code::Interrupted || st.code == Code::AuthFailed || refreshed)
                    return st;
                refreshed = true;
                asking = false;
                cluster.map = SlotMap();
                continue;
            }
            if (asking) {
                CommandPipeline ask;
                ask.add({"ASKING"});
                std::vector<RedisReply> ok;
                st = link->execute(ask, &ok, io_timeout_ms, waiter);
                if (!st.ok())
                    return st;  // nothing of the unit was sent yet
            }
            replies->clear();
            st = link->execute(pipeline, replies, io_timeout_ms, waiter, then);
            if (!st.ok()) {
                trip->in_doubt = true;
                cluster.links.erase(trip->node);
                return st;
            }
            Redirect r = first_redirect(*replies);
            switch (r.kind) {
                case Redirect::Kind::None:
                    return st;
                case Redirect::Kind::ClusterDown:
                    trip->cluster_down = true;
                    cluster.map = SlotMap();
                    return io_failure(Code::ConnectFailed, "Redis Cluster is down (CLUSTERDOWN) at", trip->node);
                case Redirect::Kind::TryAgain:
                    // A multi-key unit met a slot in migration with part of its keys moved: wait, again.
                    if (waiter.wait(-1, false, false, kTryAgainMs) == WaitResult::Interrupted)
                        return io_failure(Code::Interrupted, "interrupted while waiting for a slot migration");
                    break;
                case Redirect::Kind::Ask:
                    asking = true;
                    ask_at = r.at;
                    if (ask_at.host.empty())
                        ask_at.host = at.host;
                    break;
                case Redirect::Kind::Moved: {
                    asking = false;
                    HostPort moved_to = r.at;
                    if (moved_to.host.empty())
                        moved_to.host = at.host;
                    RedisStatus fresh = refresh_slot_map(cluster, timeout_ms, waiter);
                    if (fresh.code == Code::Interrupted)
                        return fresh;
                    int owner = cluster.map.known() ? cluster.map.owner[static_cast<std::size_t>(r.slot)] : -1;
                    if (owner < 0 ||
                        address_of(cluster.map.nodes[static_cast<std::size_t>(owner)].at) != address_of(moved_to)) {
                        // The map does not say so yet: believe the node that redirected us.
                        if (!cluster.map.known())
                            cluster.map.owner.assign(kClusterSlots, -1);
                        ClusterNode node;
                        node.at = moved_to;
                        node.master = true;
                        node.health = "online";
                        cluster.map.nodes.push_back(node);
                        cluster.map.owner[static_cast<std::size_t>(r.slot)] =
                            static_cast<int>(cluster.map.nodes.size() - 1);
                    }
                    break;
                }
            }
        }
        return io_failure(Code::ConnectFailed,
                          ("Redis Cluster: slot " + std::to_string(slot) + " kept redirecting").c_str(), trip->node);
    } catch (...) {
        trip->in_doubt = true;
        return io_failure(Code::ConnectFailed, "out of memory in a Redis Cluster round trip");
    }
}

}  // namespace jobbuf::redis
