// Pure C++ regime: the parsed form of jobbuf.redis_url and its parser.
#pragma once
#include <string>
#include <vector>

namespace jobbuf::redis {

// How a TLS connection checks the server (jobbuf.redis_tls_* settings, not part of the URL).
struct TlsOptions {
    enum class Verify { Full, Ca, None };  // chain and host name / chain only / nothing
    Verify verify = Verify::Full;
    std::string ca_file;    // empty: the system trust store
    std::string cert_file;  // client certificate (mutual TLS); empty: none
    std::string key_file;   // its private key; empty: in cert_file
};

struct HostPort {
    std::string host;
    int port = 0;
};

struct RedisEndpoint {
    // Sentinel: the master is asked of `sentinels` by `master_name` (net/sentinel_locator.h),
    // which gives a Tcp endpoint with the same credentials, db and TLS.
    // Cluster: `seeds` are asked for the hash slot map (cluster/cluster_links.h); each node is
    // then a Tcp endpoint with the same credentials and TLS (db is always 0).
    enum class Kind { Tcp, Unix, Sentinel, Cluster };
    Kind kind = Kind::Tcp;
    std::string host = "127.0.0.1";  // Tcp
    int port = 6379;                 // Tcp
    bool tls = false;                // rediss:// and rediss+sentinel://
    TlsOptions tls_options;
    std::vector<HostPort> sentinels;  // Sentinel
    std::string master_name;          // Sentinel
    std::vector<HostPort> seeds;      // Cluster
    std::string socket_path;          // Unix
    std::string user;                 // ACL user; empty: the default user
    std::string password;             // empty: no AUTH (a user needs one: jobbuf.redis_password_file)
    int db = 0;

    // The URL with the password replaced by "***": safe for logs and status views.
    std::string redacted() const;
};

// Parses "redis://[user[:password]@]host[:port][/db]", "rediss://..." (TLS), "unix:///path[?db=N]",
// or "redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/master[/db]" (and
// "rediss+sentinel://"; sentinels default to port 26379), or
// "redis+cluster://[user[:password]@]host[:port][,host[:port]...][/0]" (and "rediss+cluster://") (percent-escapes allowed in user and
// password; IPv6 hosts in brackets).
// On failure returns false and sets *error to a one-line reason; never throws.
bool parse_redis_url(const char* url, RedisEndpoint* out, std::string* error) noexcept;

}  // namespace jobbuf::redis
