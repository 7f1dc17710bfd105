// Pure C++ regime: the DrainSession behind drain_session.h's plain-data interface, and the
// helpers its files share (drain_session.cpp: configure, connect, deliver; session_marker.cpp:
// the delivery marker; session_lease.cpp: the delivery lease; replica_ack.cpp: WAIT for replicas
// and READONLY).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "redis/connection.h"
#include "redis/delivery.h"
#include "redis/drain_session.h"
#include "redis/endpoint.h"
#include "redis/net/sentinel_locator.h"

namespace jobbuf::redis {

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
    bool configured = false;
    std::vector<std::int64_t> marker_ids;
    std::vector<JobOutcome> last_outcomes;  // of the last deliver
    std::size_t max_bulk_bytes = kDefaultMaxBulkBytes;      // in effect: the lower of these two
    std::size_t refused_bulk_bytes = kDefaultMaxBulkBytes;  // learned from protocol errors
    std::string client_name;  // names every connection of this worker (see connection_fence.h)
    std::string lease_key;    // the delivery lease (session_lease.cpp); empty: none
    std::string lease_value;  // this cluster, as the lease names its holder
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
const CommandBatch* replica_wait(const DrainSession* session, CommandBatch* wait);

// Takes WAIT's reply (the last one) out of replies: Ok when enough replicas acknowledged `what`.
SessionReport take_replica_wait(const DrainSession* session, std::vector<RedisReply>* replies, const char* what);

// Drops the connection when a reply says the server is a replica now (READONLY).
void leave_a_replica(DrainSession* session, const std::vector<RedisReply>& replies);

// The delivery lease's lifetime: twice jobbuf.redis_timeout.
long lease_lifetime_ms(const DrainSession* session);

// Takes or refreshes the delivery lease (session_lease.cpp); *taken when it was free. Held,
// with the connection closed, while another cluster holds it; Ok with a message (a warning) when
// this Redis user may not run scripts.
SessionReport take_lease(DrainSession* session, IoWaiter& waiter, bool* taken);

}  // namespace jobbuf::redis
