// Pure C++ regime: the Sentinel master locator (see sentinel_locator.h).
#include "redis/regime.h"

#include <charconv>
#include <string>
#include <vector>

#include "redis/net/io_deadline.h"
#include "redis/net/sentinel_locator.h"

namespace jobbuf::redis {
namespace {

using Code = RedisStatus::Code;

std::string host_port(const std::string& host, int port)
{
    bool v6 = host.find(':') != std::string::npos;
    return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// Runs one command on conn; a reply error is a failure too (its text in the message).
RedisStatus ask(RedisConnection& conn, std::initializer_list<std::string_view> args, long timeout_ms, IoWaiter& waiter,
                RedisReply* reply)
{
    CommandPipeline pipeline;
    pipeline.add(args);
    std::vector<RedisReply> replies;
    RedisStatus st = conn.execute(pipeline, &replies, timeout_ms, waiter);
    if (!st.ok())
        return st;
    *reply = std::move(replies.at(0));
    if (reply->is_error())
        return io_failure(Code::ProtocolError, reply->str.c_str());
    return st;
}

// The master's address as one sentinel knows it.
RedisStatus ask_sentinel(const RedisEndpoint& endpoint, const HostPort& sentinel, const std::string& password,
                         long timeout_ms, IoWaiter& waiter, HostPort* master)
{
    RedisEndpoint at;
    at.host = sentinel.host;
    at.port = sentinel.port;
    at.tls = endpoint.tls;
    at.tls_options = endpoint.tls_options;
    at.password = password;
    RedisConnection conn;
    RedisStatus st = conn.connect(at, timeout_ms, waiter);
    if (!st.ok())
        return st;
    RedisReply reply;
    st = ask(conn, {"SENTINEL", "get-master-addr-by-name", endpoint.master_name}, timeout_ms, waiter, &reply);
    if (!st.ok())
        return st;
    if (reply.type == RedisReply::Type::Nil)
        return io_failure(Code::ConnectFailed, "does not know this master");
    int port = 0;
    if (reply.type == RedisReply::Type::Array && reply.elements.size() == 2) {
        const std::string& text = reply.elements[1].str;
        auto res = std::from_chars(text.data(), text.data() + text.size(), port);
        if (res.ec != std::errc() || res.ptr != text.data() + text.size())
            port = 0;
    }
    if (port <= 0 || port > 65535 || reply.elements[0].str.empty())
        return io_failure(Code::ProtocolError, "unexpected reply to SENTINEL get-master-addr-by-name");
    master->host = reply.elements[0].str;
    master->port = port;
    return st;
}

// Connects conn to the address a sentinel named and checks that ROLE says master.
RedisStatus connect_confirmed(RedisConnection& conn, const RedisEndpoint& endpoint, const HostPort& master,
                              long timeout_ms, IoWaiter& waiter)
{
    RedisEndpoint at = endpoint;
    at.kind = RedisEndpoint::Kind::Tcp;
    at.host = master.host;
    at.port = master.port;
    at.sentinels.clear();
    RedisStatus st = conn.connect(at, timeout_ms, waiter);
    if (!st.ok())
        return st;
    RedisReply role;
    st = ask(conn, {"ROLE"}, timeout_ms, waiter, &role);
    if (st.ok() && (role.type != RedisReply::Type::Array || role.elements.empty() || role.elements[0].str != "master"))
        st = io_failure(Code::ConnectFailed, "it is not a master (ROLE says",
                        (role.elements.empty() ? std::string("nothing") : role.elements[0].str) + ")");
    if (!st.ok())
        conn.close();
    return st;
}

bool gives_up_at_once(const RedisStatus& st)
{
    return st.code == Code::Interrupted || st.code == Code::AuthFailed;
}

}  // namespace

RedisStatus connect_to_master(RedisConnection& conn, const RedisEndpoint& endpoint,
                              const std::string& sentinel_password, long timeout_ms, IoWaiter& waiter,
                              SentinelCursor* cursor) noexcept
{
    try {
        if (endpoint.kind != RedisEndpoint::Kind::Sentinel)
            return conn.connect(endpoint, timeout_ms, waiter);
        conn.close();
        cursor->master.clear();
        std::string tried;
        std::size_t n = endpoint.sentinels.size();
        for (std::size_t k = 0; k < n; ++k) {
            std::size_t i = (cursor->first + k) % n;
            const HostPort& sentinel = endpoint.sentinels[i];
            HostPort master;
            RedisStatus st = ask_sentinel(endpoint, sentinel, sentinel_password, timeout_ms, waiter, &master);
            if (st.code == Code::Interrupted)
                return st;
            if (st.ok()) {
                st = connect_confirmed(conn, endpoint, master, timeout_ms, waiter);
                if (st.ok()) {
                    cursor->first = i;
                    cursor->master = host_port(master.host, master.port);
                    return st;
                }
                if (gives_up_at_once(st))
                    return st;
                st.message = "names " + host_port(master.host, master.port) + ": " + st.message;
            }
            tried += (tried.empty() ? "sentinel " : "; sentinel ") + host_port(sentinel.host, sentinel.port) + " " +
                     st.message;
        }
        return io_failure(Code::ConnectFailed,
                          ("Redis Sentinel: no reachable master \"" + endpoint.master_name + "\"").c_str(), tried);
    } catch (...) {
        conn.close();
        return io_failure(Code::ConnectFailed, "out of memory while asking the sentinels");
    }
}

}  // namespace jobbuf::redis
