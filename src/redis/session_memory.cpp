// Pure C++ regime: the drain session's Redis memory guard (SPEC 1.3, "Flow control at the
// drain": Redis memory and Eviction; decisions in memory_guard.h). Per Redis node the worker
// sends to (the server, the Sentinel master, each master of a Cluster): the last `INFO memory`
// reading, the verdict and the bytes sent since, so that the room is known between readings.
// INFO is read on a clock (every second), every call once the room left is close to nothing,
// and every 100 ms while delivery is held; a new master (a failover, a reconnect, a slot moved)
// is read before anything is sent to it.
#include "redis/regime.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "redis/cluster/slot_hash.h"
#include "redis/drain_session.h"
#include "redis/session_state.h"

namespace jobbuf::redis {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kReadEvery(1000);
constexpr std::chrono::milliseconds kHeldReadEvery(100);
// Read at every call once the room left, as counted down from the last reading, is below this.
// The count-down is conservative (each job's text plus kJobOverheadBytes, and nothing for what
// consumers take meanwhile), so a batch never passes the room of a reading: the extra readings only
// find the room consumers made. Reading at every batch from a tenth of the limit instead halved
// the drain of a million jobs into a 1 GB Redis (make bench, phase baseline).
constexpr std::uint64_t kNearBytes = 1024 * 1024;
// What Redis keeps per job beyond its text (a list entry, a stream entry's ids, a hash's fields),
// counted against the room between readings.
constexpr std::size_t kJobOverheadBytes = 96;
// The LOG that ends a WARNING comes once delivery has not been held for this long.
constexpr std::chrono::minutes kQuietAfterHold(10);

std::string mib(std::uint64_t bytes)
{
    char text[64];
    std::snprintf(text, sizeof(text), "%.1f MB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return text;
}

// The node a unit for target goes to, as the guard names it: "" for a single server or a Sentinel
// master (a new connection forgets its reading), "host:port" of the master serving the target's
// hash slot on a Cluster. *hash_slot: where INFO is sent (-1: the connection).
std::string node_for(DrainSession* session, const QueueTarget* target, int* hash_slot)
{
    *hash_slot = -1;
    if (!session->is_cluster())
        return "";
    std::string why;
    int slot = target_hash_slot(*target, &why);
    if (slot < 0 || !session->cluster.map.known())
        return "";
    *hash_slot = slot;
    int owner = session->cluster.map.owner.at(static_cast<std::size_t>(slot));
    return owner >= 0 ? session->cluster.map.nodes.at(static_cast<std::size_t>(owner)).address()
                      : "slot " + std::to_string(slot);
}

std::string node_name(const DrainSession* session, const std::string& node)
{
    if (!node.empty())
        return "Redis master " + node;
    std::string text = "Redis " + session->endpoint.redacted();
    if (!session->sentinels.master.empty())
        text += " (master " + session->sentinels.master + ")";
    return text;
}

void set_notice(MemoryNotice* notice, MemoryNotice::Level level, const std::string& text)
{
    notice->level = level;
    std::snprintf(notice->text, sizeof(notice->text), "%s", text.c_str());
}

// Reads INFO memory from the node into its state. Unavailable/Interrupted on a failed round
// trip; Ok otherwise (a refused or unreadable reply leaves the node unguarded, with a notice).
SessionReport read_memory(DrainSession* session, IoWaiter& waiter, int hash_slot, const std::string& node,
                          NodeMemory* state, MemoryNotices* notices, Clock::time_point now)
{
    CommandPipeline pipeline;
    pipeline.add({"INFO", "memory"});
    std::vector<RedisReply> replies;
    RedisStatus status = session_round_trip(session, hash_slot, pipeline, &replies, session->timeout_ms, waiter);
    if (!status.ok())
        return report_failure(status, "reading INFO memory");
    const RedisReply& reply = replies.at(0);
    RedisMemory memory;
    std::string error;
    bool parsed = false;
    if (reply.is_error())
        error = reply.str;
    else if (reply.type != RedisReply::Type::String)
        error = "not a bulk string";
    else
        parsed = parse_info_memory(reply.str, &memory, &error);
    state->read = true;
    state->read_at = now;
    session->memory_readings++;
    state->sent_since_read = 0;
    if (!parsed) {
        // As in 1.2: delivered to without a guard, said once per node.
        state->verdict = MemoryVerdict{};
        state->unguarded = true;
        if (!state->info_warned)
            set_notice(&notices->info, MemoryNotice::Level::Warning,
                       node_name(session, node) + " refuses INFO memory (" + error +
                           "); jobbuf.redis_memory_limit cannot apply to it, and jobs are delivered to it unguarded");
        state->info_warned = true;
        return {};
    }
    state->unguarded = false;
    if (state->info_warned)
        set_notice(&notices->info, MemoryNotice::Level::Log, node_name(session, node) + " answers INFO memory again");
    state->info_warned = false;
    state->verdict = evaluate(session->memory_limit, memory, state->verdict.held);
    std::string policy(memory.policy());
    if (state->verdict.evicts_jobs && policy != state->policy_warned) {
        set_notice(&notices->eviction, MemoryNotice::Level::Warning,
                   node_name(session, node) + " evicts keys (maxmemory-policy " + policy + ", maxmemory " +
                       mib(memory.maxmemory) +
                       "): delivered jobs can be lost before a consumer takes them. Set maxmemory-policy noeviction, "
                       "or jobbuf.redis_require_noeviction = on to deliver nothing to it");
        state->policy_warned = policy;
    } else if (!state->verdict.evicts_jobs && !state->policy_warned.empty()) {
        set_notice(&notices->eviction, MemoryNotice::Level::Log,
                   node_name(session, node) + " no longer evicts jobs (maxmemory-policy " +
                       (policy.empty() ? std::string("not reported") : policy) + ")");
        state->policy_warned.clear();
    }
    state->maxmemory = memory.maxmemory;
    return {};
}

bool due_for_reading(const NodeMemory& state, Clock::time_point now)
{
    if (!state.read)
        return true;
    if (state.verdict.held || state.refused_eviction)
        return now - state.read_at >= kHeldReadEvery;
    if (now - state.read_at >= kReadEvery)
        return true;
    if (!state.verdict.limited)
        return false;
    return state.verdict.room_bytes <= state.sent_since_read + kNearBytes;
}

}  // namespace

SessionReport drain_session_memory_room(DrainSession* session, IoWaiter& waiter, const QueueTarget* target,
                                        MemoryRoom* room, MemoryNotices* notices) noexcept
{
    try {
        *room = MemoryRoom{};
        // With the guard off nothing is read (the eviction check uses the guard's readings),
        // unless delivery depends on the policy.
        if (session->memory_limit.kind == MemoryLimit::Kind::Off && !session->require_noeviction)
            return {};
        int hash_slot = -1;
        std::string node = node_for(session, target, &hash_slot);
        NodeMemory& state = session->memory_nodes[node];
        Clock::time_point now = Clock::now();
        if (due_for_reading(state, now)) {
            SessionReport read = read_memory(session, waiter, hash_slot, node, &state, notices, now);
            if (read.status != SessionReport::Status::Ok)
                return read;
        }
        const MemoryVerdict& verdict = state.verdict;
        state.refused_eviction = session->require_noeviction && verdict.evicts_jobs;
        if (state.refused_eviction)
            return report_of(SessionReport::Status::Full,
                             node_name(session, node) +
                                 " can evict jobs and jobbuf.redis_require_noeviction is on: nothing is delivered to "
                                 "it; the jobs wait staged");
        if (verdict.held) {
            if (!state.held_warned)
                set_notice(&notices->memory, MemoryNotice::Level::Warning,
                           node_name(session, node) + " is at jobbuf.redis_memory_limit (used " +
                               mib(verdict.counted_bytes) + " of " + mib(verdict.limit_bytes) +
                               (state.maxmemory > 0 ? ", maxmemory " + mib(state.maxmemory) : std::string()) +
                               "): nothing is delivered to it until it is below " + mib(verdict.resume_below) +
                               "; the jobs wait staged");
            state.held_warned = true;
            state.last_held = now;
            return report_of(SessionReport::Status::Full, node_name(session, node) + " is at jobbuf.redis_memory_limit");
        }
        if (state.held_warned && now - state.last_held >= kQuietAfterHold) {
            set_notice(&notices->memory, MemoryNotice::Level::Log,
                       node_name(session, node) + " has stayed below jobbuf.redis_memory_limit for 10 minutes");
            state.held_warned = false;
        }
        if (verdict.limited) {
            room->limited = true;
            room->limit_bytes = verdict.limit_bytes;
            room->room_bytes =
                verdict.room_bytes > state.sent_since_read ? verdict.room_bytes - state.sent_since_read : 0;
        }
        return {};
    } catch (...) {
        return out_of_memory();
    }
}

void drain_session_memory_spent(DrainSession* session, const QueueTarget* target, std::size_t bytes,
                                std::size_t jobs) noexcept
{
    try {
        int hash_slot = -1;
        auto found = session->memory_nodes.find(node_for(session, target, &hash_slot));
        if (found != session->memory_nodes.end())
            found->second.sent_since_read += bytes + jobs * kJobOverheadBytes;
    } catch (...) {
    }
}

int drain_session_memory_readings(const DrainSession* session, NodeMemoryReading* out, int max,
                                  std::uint64_t* generation) noexcept
{
    int n = 0;
    try {
        *generation = session->memory_readings;
        for (const auto& entry : session->memory_nodes) {
            if (n >= max)
                break;
            if (!entry.second.read || entry.second.unguarded)
                continue;
            std::string name = entry.first.empty() ? node_name(session, entry.first) : entry.first;
            if (entry.first.empty() && name.rfind("Redis ", 0) == 0)
                name = name.substr(6);
            NodeMemoryReading& r = out[n++];
            std::snprintf(r.node, sizeof(r.node), "%s", name.c_str());
            r.counted_bytes = entry.second.verdict.counted_bytes;
            r.limit_bytes = entry.second.verdict.limited ? entry.second.verdict.limit_bytes : 0;
            r.held = entry.second.verdict.held;
        }
    } catch (...) {
    }
    return n;
}

void forget_memory_readings(DrainSession* session) noexcept
{
    for (auto& entry : session->memory_nodes)
        entry.second.read = false;
}

}  // namespace jobbuf::redis
