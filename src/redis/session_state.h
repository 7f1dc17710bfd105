// Pure C++ regime: the DrainSession behind drain_session.h's plain-data interface, and the
// helpers its files share (drain_session.cpp: configure, connect, deliver; session_marker.cpp:
// the delivery marker; session_lease.cpp: the delivery lease; replica_ack.cpp: WAIT for replicas
// and READONLY).
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "redis/cluster/cluster_links.h"
#include "redis/connection.h"
#include "redis/delivery.h"
#include "redis/marker_view.h"
#include "redis/endpoint.h"
#include "redis/memory_guard.h"
#include "redis/net/sentinel_locator.h"
#include "redis/session_report.h"

namespace jobbuf::redis {

// The memory guard's state for one Redis node (session_memory.cpp).
struct NodeMemory {
    bool read = false;                              // a reading since the last connect
    std::chrono::steady_clock::time_point read_at;  // of the last reading
    MemoryVerdict verdict;                          // of the last reading
    std::uint64_t maxmemory = 0;                    // of the last reading
    std::uint64_t sent_since_read = 0;              // bytes counted against the room since then
    bool unguarded = false;                         // the node refused INFO memory
    bool refused_eviction = false;                  // evicts, under jobbuf.redis_require_noeviction
    bool held_warned = false;                       // a WARNING said it held; no LOG since
    std::chrono::steady_clock::time_point last_held;
    bool info_warned = false;    // a WARNING said it refuses INFO
    std::string policy_warned;  // the evicting policy a WARNING named; empty: none
};

class DrainSession {
public:
    RedisConnection connection;
    RedisEndpoint endpoint;
    std::string url;  // every setting the connection depends on, to tell whether it changed
    std::string sentinel_password;
    SentinelCursor sentinels;  // which sentinel to ask first, and the master it named
    std::string marker_key;
    long timeout_ms = 2000;
    int min_replicas = 0;
    MemoryLimit memory_limit;         // jobbuf.redis_memory_limit, parsed
    bool require_noeviction = false;  // jobbuf.redis_require_noeviction
    std::map<std::string, NodeMemory> memory_nodes;  // by node_for() (session_memory.cpp)
    std::uint64_t memory_readings = 0;               // INFO memory readings taken, ever
    bool configured = false;
    std::vector<std::int64_t> marker_ids;
    std::vector<JobOutcome> last_outcomes;                  // of the last deliver
    std::size_t max_bulk_bytes = kDefaultMaxBulkBytes;      // in effect: the lower of these two
    std::size_t refused_bulk_bytes = kDefaultMaxBulkBytes;  // learned from protocol errors
    std::string client_name;  // names every connection of this worker (see connection_fence.h)
    std::string lease_key;    // the delivery lease (session_lease.cpp); empty: none
    std::string lease_value;  // this cluster, as the lease names its holder
    // Another holder's lease as this session last found it (holder and refresh count), when it
    // was first found so and when last (session_lease.cpp): it lapses only once it has been seen
    // unchanged, with no gap, for its whole lifetime.
    std::string observed_lease;
    std::chrono::steady_clock::time_point observed_since;
    std::chrono::steady_clock::time_point observed_last;

    // The continuity of starts (docs/copies.md). Delivery numbers: every unit's marker carries the
    // next one, and the Postgres side records it in jobbuf.delivery_counter in the batch's own
    // transaction; counter is the highest this session knows used (pushed, read, or committed).
    std::int64_t counter = 0;
    std::int64_t last_unit_number = 0;  // the number of the last unit sent
    bool last_unit_ran = false;         // its EXEC reply came back: it ran (counter includes its number)
    // The committed counter this start last carried in its lease ("<holder>#<n>;<counter>"):
    // never above jobbuf.delivery_counter as committed (the Postgres side sets it after commit).
    std::int64_t lease_counter = 0;
    std::int64_t taken_counter = 0;     // the counter the lease last taken over carried
    std::vector<MarkerValue> markers;   // as last read (reconciliation, or the evidence for a lapsed lease)
    std::vector<MarkerView> marker_views;
    // A lapsed lease is taken only by a start that continues its holder: the Postgres side answers
    // (drain_session_continuity_question) for the lapsed value continuity_for.
    // A free lease with numbered markers in Redis needs the same proof: continuity_for then names
    // that evidence (the highest marker's number, digest and writer) and continuity_free is set.
    enum class Continuity { Unknown, Asked, Proven, Refuted };
    Continuity continuity = Continuity::Unknown;
    std::string continuity_for;
    bool continuity_free = false;
    bool took_free = false;         // the last connection or refresh took a free lease, not yet told
    bool took_free_proven = false;  // ... with markers in Redis: this start's own, or ones it continues
    bool take_over = false;        // jobbuf_take_over(): the next connection takes the lease from any holder
    bool took_over = false;        // the last connection took the lease over (lapsed or forced), not yet told
    bool took_over_forced = false;
    std::string taken_from;        // the holder it took the lease from

    // A Cluster endpoint (cluster/cluster_session.cpp): one unit, and one marker, per hash slot.
    ClusterLinks cluster;                       // the links to its nodes and its hash slot map
    std::set<int> marker_hash_slots;            // the hash slots whose marker may name jobs
    bool markers_scanned = false;               // the masters were searched for the markers of earlier runs
    std::map<int, std::string> hash_slot_tags;  // slot_tag() of the hash slots met so far
    int last_hash_slot = -1;                    // the hash slot of the last unit sent

    bool is_cluster() const { return endpoint.kind == RedisEndpoint::Kind::Cluster; }
};

// A report with a one-line message.
SessionReport report_of(SessionReport::Status status, const std::string& text);

// A failed round trip as a report (Interrupted or Unavailable); the connection is already closed.
SessionReport report_failure(const RedisStatus& status, const char* doing);

SessionReport out_of_memory();

// How long a round trip may wait: jobbuf.redis_timeout, longer when it carries a WAIT.
long round_trip_limit(const DrainSession* session);

// WAIT <min_replicas> <timeout> in *wait, to send after the writes it must see acknowledged;
// null without min_replicas.
const CommandPipeline* replica_wait(const DrainSession* session, CommandPipeline* wait);

// Takes WAIT's reply (the last one) out of replies: Ok when enough replicas acknowledged `what`.
SessionReport take_replica_wait(const DrainSession* session, std::vector<RedisReply>* replies, const char* what);

// One round trip: to the server, or on a cluster to the node that serves hash_slot (redirections
// followed, cluster/cluster_links.h). A failure closes what failed (on a cluster, the hash slot map
// is forgotten: the next connect asks for it again).
RedisStatus session_round_trip(DrainSession* session, int hash_slot, const CommandPipeline& pipeline,
                               std::vector<RedisReply>* replies, long timeout_ms, IoWaiter& waiter,
                               const CommandPipeline* then = nullptr);

// The marker's key: marker_key, or on a cluster the marker of one hash slot, "<marker_key>{<tag>}"
// with a tag that lands in that hash slot.
std::string marker_key_of(DrainSession* session, int hash_slot);

// On a cluster: the hash slot of every key the target writes; -1 with *why when the target cannot
// live on a cluster (Sidekiq, Celery, keys in more than one hash slot).
int target_hash_slot(const QueueTarget& target, std::string* why);

// Connects to a cluster: asks it for its hash slot map (through a fenced link); see
// drain_session_connect.
SessionReport cluster_connect(DrainSession* session, IoWaiter& waiter, bool* fresh);

// The hash slots whose marker reconciliation reads: those units went to in this run, and, the first
// time, every marker of this installation found on the masters (SCAN).
SessionReport cluster_marker_hash_slots(DrainSession* session, IoWaiter& waiter, std::vector<int>* hash_slots);

// Drops the connection when a reply says the server is a replica now (READONLY).
void leave_a_replica(DrainSession* session, const std::vector<RedisReply>& replies);

// Reads every marker of this installation into session->markers (and marker_views; the counter
// rises to the highest number read). With confirm, a marker that names jobs counts only once
// min_replicas replicas have it (reconciliation); without, nothing is written (lease evidence).
SessionReport read_markers(DrainSession* session, IoWaiter& waiter, bool confirm);

// The delivery lease's lifetime: twice jobbuf.redis_timeout.
long lease_lifetime_ms(const DrainSession* session);

// Makes the memory guard read every node again before sending to it (a new connection: a
// Sentinel failover, a restarted server).
void forget_memory_readings(DrainSession* session) noexcept;

// Takes or refreshes the delivery lease (session_lease.cpp); *taken when it was free. Held,
// with the connection closed, while another cluster holds it; Ok with a message (a warning) when
// this Redis user may not run scripts.
SessionReport take_lease(DrainSession* session, IoWaiter& waiter, bool* taken);

}  // namespace jobbuf::redis
