// Pure C++ regime: the worker's Redis side, shaped for the Postgres regime to call. It owns the
// connection and the marker, and speaks only plain data (no C++ object crosses the boundary,
// nothing throws), so the Postgres side can hold it across ereport-able code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "redis/io_waiter.h"
#include "redis/job_types.h"
#include "redis/marker_view.h"
#include "redis/session_report.h"
#include "redis/target_handle.h"

namespace jobbuf::redis {

class DrainSession;

// Factory and destructor as plain functions: the Postgres side keeps a raw pointer.
DrainSession* drain_session_create() noexcept;
void drain_session_destroy(DrainSession* session) noexcept;

// The worker's Redis settings (jobbuf.redis_*), as plain C data owned by the caller.
struct SessionSettings {
    const char* redis_url = "";
    const char* password = nullptr;           // when not NULL, replaces the URL's (jobbuf.redis_password_file)
    const char* sentinel_password = nullptr;  // AUTH to the sentinels (jobbuf.redis_sentinel_password_file)
    long timeout_ms = 2000;
    const char* client_name = "";  // names the worker's connections (connection_fence.h)
    int tls_verify = 0;            // TlsOptions::Verify as int
    const char* tls_ca_file = "";
    const char* tls_cert_file = "";
    const char* tls_key_file = "";
    int min_replicas = 0;  // WAIT for this many replicas after each unit (0: no WAIT)
    const char* memory_limit = "off";  // jobbuf.redis_memory_limit as written (memory_guard.h)
    bool require_noeviction = false;   // jobbuf.redis_require_noeviction
};

// (Re)configures the session; drops the connection when anything that the connection depends
// on (URL, passwords, TLS files and mode) changed.
SessionReport drain_session_configure(DrainSession* session, const SessionSettings& settings) noexcept;

// Sets the key of the batch marker; true when it changed (the caller then reconciles).
bool drain_session_set_marker_key(DrainSession* session, const char* marker_key) noexcept;

// The delivery lease: which cluster delivers this installation's jobs to this Redis
// (session_lease.cpp). lease_value names this cluster (host, port, data directory, system
// identifier: a restarted cluster is the same holder, a clone is another). Set before connecting;
// true when it changed (the connection is then dropped: the next one takes the new lease first).
bool drain_session_set_lease(DrainSession* session, const char* lease_key, const char* lease_value) noexcept;

// Refreshes the lease (it lasts twice jobbuf.redis_timeout). Held, with the connection closed,
// when another cluster holds it: nothing may be pushed.
SessionReport drain_session_keep_lease(DrainSession* session, IoWaiter& waiter) noexcept;

// Connects if not connected, takes the delivery lease (Held while another cluster holds it: it
// then neither fences nor reads the marker), and fences off the worker's earlier connections. Ok when connected
// (then *fresh tells whether it just connected; a non-empty message on a fresh connection is a
// warning that fencing is unavailable).
SessionReport drain_session_connect(DrainSession* session, IoWaiter& waiter, bool* fresh) noexcept;

bool drain_session_connected(const DrainSession* session) noexcept;

// The connection's socket, for the caller to wait on while idle (-1 when not connected); when it
// becomes readable, drain_session_check_open says whether the connection survived (see
// RedisConnection::still_open).
int drain_session_socket(const DrainSession* session) noexcept;
bool drain_session_check_open(DrainSession* session) noexcept;

// The longest bulk string Redis accepts: its proto-max-bulk-len, read with CONFIG GET on every
// fresh connection (512 MB, Redis's default, when CONFIG is not allowed), lowered when Redis
// refuses a request with a protocol error and closes the connection (see drain_session_deliver).
std::size_t drain_session_max_bulk_bytes(const DrainSession* session) noexcept;
void drain_session_disconnect(DrainSession* session) noexcept;

// Forgets the configuration (a setting became unusable): no connection until configured again.
void drain_session_unconfigure(DrainSession* session) noexcept;

// The endpoint for logs, password hidden.
void drain_session_describe(const DrainSession* session, char* out, std::size_t out_len) noexcept;

// Reads the markers: the last batch Redis accepted (on a Redis Cluster, the last unit in every
// hash slot that has a marker of this installation). On Ok, *markers/*count describe an array
// owned by the session, valid until the next call. With min_replicas, a marker is trusted only
// once that many replicas acknowledged it (it is written again, then WAIT): otherwise
// Unavailable, and the jobs it names stay staged.
SessionReport drain_session_read_marker(DrainSession* session, IoWaiter& waiter, const MarkerView** markers,
                                        std::size_t* count) noexcept;

// Replaces the marker of the last unit with the given jobs (after a partially failed batch: only
// what Redis took; staged_at parallel to ids), the same number, acknowledged by min_replicas replicas.
SessionReport drain_session_write_marker(DrainSession* session, IoWaiter& waiter, const std::int64_t* ids,
                                         const double* staged_at, std::size_t count) noexcept;

// The delivery number of the last unit sent: what the Postgres side records in
// jobbuf.delivery_counter in the batch's transaction.
std::int64_t drain_session_unit_number(const DrainSession* session) noexcept;

// The highest delivery number this session knows used (pushed by a unit that ran, read, committed).
std::int64_t drain_session_counter(const DrainSession* session) noexcept;

// Whether the last unit sent ran (its EXEC reply came back as an array): only then is its number
// used up, and recorded (a batch's transaction, or a group's release: drain_group.cpp). A unit in
// doubt (no reply) is settled by the marker read at reconciliation.
bool drain_session_unit_ran(const DrainSession* session) noexcept;

// This cluster's committed delivery counter (jobbuf.delivery_counter): the next unit's number is
// above it (and above every number this session pushed or read).
void drain_session_note_counter(DrainSession* session, std::int64_t committed) noexcept;

// Another installation's marker key (DROP and CREATE EXTENSION while the worker runs): its
// counter starts again from its committed value (numbers of the old installation do not count).
void drain_session_reset_counter(DrainSession* session, std::int64_t committed) noexcept;

// The committed counter after the holder advanced it without a batch (delivery_counter.h): the
// lease carries it from the next refresh on ("<holder>#<n>;<counter>"); a copy of this cluster
// keeps the value it was copied with. Only a committed value may be given.
void drain_session_set_lease_counter(DrainSession* session, std::int64_t committed) noexcept;

// jobbuf_take_over() asked this cluster to deliver: the next connection takes the lease from any
// holder (and the connection is dropped now so that there is a next one).
void drain_session_request_take_over(DrainSession* session) noexcept;

// True when the last connect returned Held because a lapsed lease (or a free one, with markers in
// Redis) awaits the Postgres side's verdict: does this start continue the holder? Answer with drain_session_answer_continuity,
// then connect again.
bool drain_session_continuity_question(const DrainSession* session, ContinuityEvidence* evidence) noexcept;
void drain_session_answer_continuity(DrainSession* session, bool continues) noexcept;

// After a connection or a refresh that took a free lease (the key absent): true once, with
// whether markers in Redis showed an earlier holder that this start continues (false: none left).
bool drain_session_took_free_lease(DrainSession* session, bool* proven) noexcept;

// After a connection that took another start's lease (lapsed, or by jobbuf_take_over()): true
// once, with whether it was forced, the highest delivery number of the markers then in Redis, and
// the holder it was taken from.
bool drain_session_took_over(DrainSession* session, bool* forced, std::int64_t* highest, char* from,
                             std::size_t from_len) noexcept;

// The Redis memory guard (session_memory.cpp; jobbuf.redis_memory_limit and
// jobbuf.redis_require_noeviction). What a unit for target may take now: room_bytes of job text
// when limited (0: none), unlimited otherwise. Full, with nothing sent, while the node that would
// take it is at its limit or refused for its eviction policy; Unavailable/Interrupted when
// reading INFO failed. The notices are the lines to log (at most one per kind and call).
struct MemoryRoom {
    bool limited = false;
    std::size_t room_bytes = 0;
    std::uint64_t limit_bytes = 0;  // the limit that applies (a job longer than it never fits)
};
struct MemoryNotice {
    enum class Level { None, Log, Warning };
    Level level = Level::None;
    char text[kMessageLen] = {0};
};
struct MemoryNotices {
    MemoryNotice memory;    // held at the limit (WARNING), quiet for 10 minutes since (LOG)
    MemoryNotice eviction;  // an evicting policy (WARNING), no longer (LOG)
    MemoryNotice info;      // INFO refused: unguarded (WARNING), answered again (LOG)
};
SessionReport drain_session_memory_room(DrainSession* session, IoWaiter& waiter, const QueueTarget* target,
                                        MemoryRoom* room, MemoryNotices* notices) noexcept;

// Counts bytes of job text in jobs sent to target's node against its room until the next reading.
void drain_session_memory_spent(DrainSession* session, const QueueTarget* target, std::size_t bytes,
                                std::size_t jobs) noexcept;

// The guard's last reading of each Redis node it reads (what jobbuf_prometheus_redis_memory()
// shows): the node as the guard names it, counted memory, and the limit that applies (0: none).
struct NodeMemoryReading {
    char node[256] = {0};
    std::uint64_t counted_bytes = 0;
    std::uint64_t limit_bytes = 0;
    bool held = false;  // delivery to it is held (until it is below 90 % of the limit)
};
// Copies up to max readings (nodes read since the last connect) into out; returns how many.
// *generation: a number that changes with every reading, so the caller can tell new ones.
int drain_session_memory_readings(const DrainSession* session, NodeMemoryReading* out, int max,
                                  std::uint64_t* generation) noexcept;

// The depth of target's queue in Redis, as its consumer counts waiting work (QueueTarget's depth
// reads), in one round trip to the node that serves its keys: what max_in_redis caps.
SessionReport drain_session_depth(DrainSession* session, IoWaiter& waiter, const QueueTarget* target,
                                  long long* depth) noexcept;

// The depths of count targets (as drain_session_depth reads each) in one round trip, one per
// master on a Cluster. read[i] says whether depths[i] was read: a target refused here, whose
// reply was not a depth (an error, a Cluster's redirection: none is followed), or on a Cluster
// master that failed (its link closed, the others read) is left for drain_session_depth. A failed
// round trip to a single server ends the reading (its connection closed, as for any failed round
// trip); on a Cluster only an interruption does.
SessionReport drain_session_depths(DrainSession* session, IoWaiter& waiter, const QueueTarget* const* targets,
                                   std::size_t count, long long* depths, bool* read) noexcept;

// Whether the session delivers to a Redis Cluster (which 1.1 could not reach: no 1.1 marker there).
bool drain_session_on_cluster(const DrainSession* session) noexcept;

// Deletes the marker key (one an earlier version named differently, once reconciled).
SessionReport drain_session_delete_marker(DrainSession* session, IoWaiter& waiter) noexcept;

// Pushes one batch (jobs in id order) as one MULTI/EXEC unit with the marker. On Ok, results[i]
// says what happened to jobs[i] and reject_message holds the first rejection's error text. A job
// larger than drain_session_max_bulk_bytes is not sent (TooLarge) and not named by the marker.
// When Redis answers the unit with a protocol error and closes the connection (a bulk string
// over its limit that CONFIG GET could not tell), the limit is lowered below the unit's largest
// payload and the report is Refused: the next attempt leaves that job out instead of looping.
// With min_replicas, the unit is followed by WAIT in the same round trip; fewer replicas than
// that acknowledging it within the timeout is Unavailable (the jobs stay staged; the marker
// decides at the next reconciliation). A READONLY reply (the server became a replica) drops the
// connection, so that the next connect asks the sentinels again. On a Redis Cluster the unit goes
// to the node serving the hash slot of the target's keys, with that hash slot's marker
// (redirections followed, cluster/cluster_links.h); a target the cluster cannot take is Refused.
SessionReport drain_session_deliver(DrainSession* session, IoWaiter& waiter, const QueueTarget* target,
                                    const StagedJob* jobs, std::size_t count, double now_epoch, JobResult* results,
                                    char* reject_message, std::size_t reject_len) noexcept;

// On a Redis Cluster, whether the target cannot be delivered there (Sidekiq, Celery, keys in more
// than one hash slot), with the reason; false for any other endpoint. Its jobs then stay staged.
bool drain_session_refuses_target(const DrainSession* session, const QueueTarget* target, char* why,
                                  std::size_t why_len) noexcept;

// Why job i of the last drain_session_deliver was not delivered (Rejected: Redis's error;
// TooLarge: its size and Redis's limit), as one line; empty for a delivered job.
void drain_session_job_error(const DrainSession* session, std::size_t i, char* out, std::size_t out_len) noexcept;

}  // namespace jobbuf::redis
