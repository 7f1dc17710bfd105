// Pure C++ regime: finding the master of a Redis Sentinel endpoint (redis+sentinel://), as
// redis.io's "Sentinel client" guidelines describe: ask each sentinel in turn
// SENTINEL get-master-addr-by-name <master>, connect to the address it names, and confirm with
// ROLE that it is the master. The caller asks again after a READONLY reply, a dropped
// connection or a failed connect (a failover moved the master). Other endpoints connect directly.
#pragma once
#include <cstddef>
#include <string>

#include "redis/connection.h"

namespace jobbuf::redis {

// What the locator remembers between connects: the sentinel that answered last (asked first next
// time) and the master it named ("host:port", for logs).
struct SentinelCursor {
    std::size_t first = 0;
    std::string master;
};

// Connects conn to the endpoint's master within timeout_ms per server tried (AUTH and SELECT
// included). Sentinels get AUTH sentinel_password when it is not empty, and TLS when the endpoint
// has it. On failure the status names the master and what each sentinel said, on one line.
RedisStatus connect_to_master(RedisConnection& conn, const RedisEndpoint& endpoint,
                              const std::string& sentinel_password, long timeout_ms, IoWaiter& waiter,
                              SentinelCursor* cursor) noexcept;

}  // namespace jobbuf::redis
