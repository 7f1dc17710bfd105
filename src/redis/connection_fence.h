// Pure C++ regime: fencing of the worker's earlier Redis connections. A unit that the worker gave
// up on (timeout while Redis hung) can still sit unread in Redis's socket buffer and run later,
// after the worker reconnected and read the marker. Every worker connection is named after the
// cluster and database; a fresh connection kills the other connections of that name before the
// marker is read, so a stale unit either ran before the kill (and the marker shows it) or never runs.
#pragma once
#include <string>
#include <vector>

#include "redis/connection.h"

namespace jobbuf::redis {

// Ids of the clients in a CLIENT LIST reply named `name`, other than own_id.
std::vector<long long> stale_client_ids(const std::string& client_list, const std::string& name, long long own_id);

// CLIENT SETNAME name, CLIENT ID, CLIENT LIST TYPE normal, then CLIENT KILL ID for each stale
// connection. Returns a failed status when the connection failed, AuthFailed when Redis wants a
// password that was not given (NOAUTH: it refuses every command). When Redis refuses the CLIENT
// commands (an ACL without +client, a renamed command), the status is Ok and *warning says that
// stale units cannot be fenced.
RedisStatus fence_previous_connections(RedisConnection& connection, const std::string& name, long timeout_ms,
                                       IoWaiter& waiter, std::string* warning);

}  // namespace jobbuf::redis
