// Pure C++ regime: killing the worker's earlier Redis connections (see connection_fence.h).
#include "redis/regime.h"

#include <charconv>
#include <sstream>

#include "redis/connection_fence.h"

namespace jobbuf::redis {

std::vector<long long> stale_client_ids(const std::string& client_list, const std::string& name, long long own_id)
{
    std::vector<long long> ids;
    std::istringstream lines(client_list);
    std::string line;
    const std::string name_field = "name=" + name;
    while (std::getline(lines, line)) {
        long long id = -1;
        bool named = false;
        std::istringstream fields(line);
        std::string field;
        while (fields >> field) {
            if (field.rfind("id=", 0) == 0) {
                const char* begin = field.data() + 3;
                const char* end = field.data() + field.size();
                auto [ptr, ec] = std::from_chars(begin, end, id);
                if (ec != std::errc() || ptr != end)
                    id = -1;
            } else if (field == name_field) {
                named = true;
            }
        }
        if (named && id >= 0 && id != own_id)
            ids.push_back(id);
    }
    return ids;
}

RedisStatus fence_previous_connections(RedisConnection& connection, const std::string& name, long timeout_ms,
                                       IoWaiter& waiter, std::string* warning)
{
    CommandPipeline pipeline;
    pipeline.add({"CLIENT", "SETNAME", name});
    pipeline.add({"CLIENT", "ID"});
    pipeline.add({"CLIENT", "LIST", "TYPE", "normal"});
    std::vector<RedisReply> replies;
    RedisStatus status = connection.execute(pipeline, &replies, timeout_ms, waiter);
    if (!status.ok())
        return status;
    for (const RedisReply& reply : replies) {
        if (reply.is_error() && reply.str.rfind("NOAUTH", 0) == 0)
            return RedisStatus::failure(RedisStatus::Code::AuthFailed,
                                        "requires a password (" + reply.str + "): set jobbuf.redis_password_file");
        if (reply.is_error()) {
            *warning = "stale batches of an earlier connection cannot be fenced off (CLIENT: " + reply.str +
                       "); after a Redis hang a batch may be delivered twice";
            return status;
        }
    }
    std::vector<long long> stale = stale_client_ids(replies[2].str, name, replies[1].integer);
    if (stale.empty())
        return status;
    CommandPipeline kills;
    for (long long id : stale)
        kills.add({"CLIENT", "KILL", "ID", std::to_string(id)});
    replies.clear();
    // Errors ("No such client": it closed meanwhile) are fine: it can no longer run anything.
    return connection.execute(kills, &replies, timeout_ms, waiter);
}

}  // namespace jobbuf::redis
