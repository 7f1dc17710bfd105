// Pure C++ regime: the parsed form of jobbuf.redis_url and its parser.
#pragma once
#include <string>

namespace jobbuf::redis {

struct RedisEndpoint {
    enum class Kind { Tcp, Unix };
    Kind kind = Kind::Tcp;
    std::string host = "127.0.0.1";  // Tcp
    int port = 6379;                 // Tcp
    std::string socket_path;         // Unix
    std::string user;                // ACL user; empty: the default user
    std::string password;            // empty: no AUTH
    int db = 0;

    // The URL with the password replaced by "***": safe for logs and status views.
    std::string redacted() const;
};

// Parses "redis://[[user]:password@]host[:port][/db]" or "unix:///path[?db=N]"
// (percent-escapes allowed in user and password; IPv6 hosts in brackets).
// On failure returns false and sets *error to a one-line reason; never throws.
bool parse_redis_url(const char* url, RedisEndpoint* out, std::string* error) noexcept;

}  // namespace jobbuf::redis
