// Pure C++ regime: the drain session on a Redis Cluster (see session_state.h): which slot a
// queue's units go to, each slot's marker key, round trips addressed to a slot, connecting
// (asking for the slot map), and finding the markers reconciliation must read.
#include "redis/regime.h"

#include <string>

#include "redis/cluster/slot_hash.h"
#include "redis/session_state.h"

namespace jobbuf::redis {

RedisStatus session_round_trip(DrainSession* session, int slot, const CommandPipeline& pipeline,
                               std::vector<RedisReply>* replies, long timeout_ms, IoWaiter& waiter,
                               const CommandPipeline* then)
{
    if (!session->is_cluster())
        return session->connection.execute(pipeline, replies, timeout_ms, waiter, then);
    SlotTrip trip;
    RedisStatus status = slot_round_trip(session->cluster, slot < 0 ? 0 : slot, pipeline, then, replies,
                                         session->timeout_ms, timeout_ms, waiter, &trip);
    if (!status.ok())
        session->cluster.forget();
    return status;
}

std::string marker_key_of(DrainSession* session, int slot)
{
    if (slot < 0)
        return session->marker_key;
    auto found = session->hash_slot_tags.find(slot);
    if (found == session->hash_slot_tags.end())
        found = session->hash_slot_tags.emplace(slot, slot_tag(slot)).first;
    return session->marker_key + "{" + found->second + "}";
}

int target_hash_slot(const QueueTarget& target, std::string* why)
{
    switch (target.kind()) {
        case TargetKind::Sidekiq:
            *why = "the sidekiq target cannot be delivered to a Redis Cluster (Sidekiq does not support Redis Cluster)";
            return -1;
        case TargetKind::Celery:
            *why =
                "the celery target cannot be delivered to a Redis Cluster (Celery's Redis transport has no cluster support)";
            return -1;
        default:
            break;
    }
    std::vector<std::string> keys = target.written_keys();
    int slot = keys.empty() ? 0 : key_slot(keys.front());
    for (const std::string& key : keys)
        if (key_slot(key) != slot) {
            *why = target.kind() == TargetKind::Bullmq
                       ? "a bullmq queue on a Redis Cluster needs a {hash tag} in its prefix or bullmq_queue option "
                         "(for example \"prefix\": \"{bull}\"), so that BullMQ's keys of the queue share one slot"
                       : "the queue's keys are in more than one Redis Cluster slot: give them a common {hash tag}";
            return -1;
        }
    return slot;
}

SessionReport cluster_connect(DrainSession* session, IoWaiter& waiter, bool* fresh)
{
    ClusterLinks& cluster = session->cluster;
    if (cluster.map.known())
        return {};
    cluster.fencing_warning.clear();
    cluster.fence_new_links = false;  // no fence before the delivery lease is this cluster's
    RedisStatus status = refresh_slot_map(cluster, session->timeout_ms, waiter);
    if (!status.ok()) {
        cluster.forget();
        auto kind = status.code == RedisStatus::Code::Interrupted ? SessionReport::Status::Interrupted
                                                                  : SessionReport::Status::Unavailable;
        return report_of(kind, status.message);
    }
    // A cluster with a slot no online master serves answers CLUSTERDOWN: not connected yet (so
    // that an outage is one WARNING, and its end one LOG, not a recovery at every attempt).
    for (int slot = 0; slot < kClusterSlots; ++slot) {
        int owner = cluster.map.owner[static_cast<std::size_t>(slot)];
        if (owner < 0 || cluster.map.nodes[static_cast<std::size_t>(owner)].health != "online") {
            std::string node = owner < 0 ? std::string("no node")
                                         : cluster.map.nodes[static_cast<std::size_t>(owner)].address() + " (" +
                                               cluster.map.nodes[static_cast<std::size_t>(owner)].health + ")";
            cluster.forget();
            return report_of(SessionReport::Status::Unavailable,
                             "Redis Cluster is down: slot " + std::to_string(slot) + " is served by " + node);
        }
    }
    // The delivery lease first (session_lease.cpp): held by another cluster, every link is
    // forgotten; taken, the links opened so far are fenced before any marker is read.
    bool taken = false;
    SessionReport lease = take_lease(session, waiter, &taken);
    if (lease.status == SessionReport::Status::Unavailable) {
        // The master that serves the lease's slot did not answer (the map may not say it failed
        // yet): nothing can be delivered to any master before the lease is taken.
        cluster.forget();
        return report_of(SessionReport::Status::Unavailable,
                         "Redis Cluster is down: the master serving slot " +
                             std::to_string(key_slot(session->lease_key)) +
                             " (the delivery lease's) did not answer: " + lease.message);
    }
    if (lease.status != SessionReport::Status::Ok) {
        cluster.forget();
        return lease;
    }
    status = fence_open_links(cluster, session->timeout_ms, waiter);
    if (!status.ok()) {
        auto kind = status.code == RedisStatus::Code::Interrupted ? SessionReport::Status::Interrupted
                                                                  : SessionReport::Status::Unavailable;
        return report_of(kind, "fencing earlier connections: " + status.message);
    }
    std::string warning = lease.message;  // a lease that cannot be taken at all: a warning
    if (!cluster.fencing_warning.empty())
        warning = warning.empty() ? cluster.fencing_warning : warning + "; " + cluster.fencing_warning;
    *fresh = true;
    return report_of(SessionReport::Status::Ok, warning);
}

namespace {

// SCAN of one master for "<marker_key>{*}": adds the slots of the markers found.
RedisStatus scan_markers(DrainSession* session, const HostPort& at, IoWaiter& waiter)
{
    RedisConnection* link = nullptr;
    RedisStatus status = node_link(session->cluster, at, session->timeout_ms, waiter, &link);
    if (!status.ok())
        return status;
    const std::string pattern = session->marker_key + "{*}";
    std::string cursor = "0";
    do {
        CommandPipeline scan;
        scan.add({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
        std::vector<RedisReply> replies;
        status = link->execute(scan, &replies, session->timeout_ms, waiter);
        if (!status.ok())
            return status;
        const RedisReply& reply = replies.at(0);
        if (reply.type != RedisReply::Type::Array || reply.elements.size() != 2)
            return RedisStatus::failure(RedisStatus::Code::ProtocolError,
                                        "SCAN for delivery markers: " +
                                            (reply.is_error() ? reply.str : "unexpected reply"));
        cursor = reply.elements[0].str;
        for (const RedisReply& key : reply.elements[1].elements)
            if (key.str.size() > pattern.size() - 2 &&
                key.str.compare(0, session->marker_key.size() + 1, session->marker_key + "{") == 0)
                session->marker_hash_slots.insert(key_slot(key.str));
    } while (cursor != "0");
    return status;
}

}  // namespace

SessionReport cluster_marker_hash_slots(DrainSession* session, IoWaiter& waiter, std::vector<int>* slots)
{
    if (!session->markers_scanned) {
        // Every master that serves slots now, and every online master (one importing a slot may
        // serve none yet). A copy: opening links may change the map.
        std::vector<ClusterNode> owners;
        for (std::size_t n = 0; n < session->cluster.map.nodes.size(); ++n) {
            const ClusterNode& node = session->cluster.map.nodes[n];
            bool serves = false;
            for (int owner : session->cluster.map.owner)
                serves = serves || owner == static_cast<int>(n);
            if (serves || (node.master && node.health == "online"))
                owners.push_back(node);
        }
        for (const ClusterNode& node : owners) {
            RedisStatus status = scan_markers(session, node.at, waiter);
            if (!status.ok()) {
                session->cluster.forget();
                std::string doing = "looking for delivery markers on " + node.address();
                return report_failure(status, doing.c_str());
            }
        }
        session->markers_scanned = true;
    }
    slots->assign(session->marker_hash_slots.begin(), session->marker_hash_slots.end());
    return {};
}

}  // namespace jobbuf::redis
