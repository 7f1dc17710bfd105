// Parsing of jobbuf.redis_url into a RedisEndpoint, and its redacted form for logs.
// Pure C++ regime. Error messages never quote the URL's user, password, port or db text:
// only fixed words (and the scheme), so a mistyped URL cannot leak a secret into a log.
#include "redis/regime.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>
#include <string_view>

#include "redis/endpoint.h"
#include "redis/hex_digit.h"

namespace jobbuf::redis {
namespace {

constexpr std::string_view kRedisScheme = "redis://";
constexpr std::string_view kTlsScheme = "rediss://";
constexpr std::string_view kSentinelScheme = "redis+sentinel://";
constexpr std::string_view kTlsSentinelScheme = "rediss+sentinel://";
constexpr std::string_view kClusterScheme = "redis+cluster://";
constexpr std::string_view kTlsClusterScheme = "rediss+cluster://";
constexpr std::string_view kUnixScheme = "unix://";
constexpr int kSentinelDefaultPort = 26379;

// Decodes %XX escapes; false on a malformed escape.
bool percent_decode(std::string_view in, std::string* out)
{
    out->clear();
    out->reserve(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i] != '%') {
            out->push_back(in[i]);
            continue;
        }
        if (i + 2 >= in.size())
            return false;
        int hi = hex_digit(in[i + 1]);
        int lo = hex_digit(in[i + 2]);
        if (hi < 0 || lo < 0)
            return false;
        out->push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
    }
    return true;
}

// Escapes what would not survive a round trip through the parser (for redacted()).
void percent_encode(std::string_view in, std::string* out)
{
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (unsigned char c : in) {
        bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                     c == '.' || c == '_' || c == '~';
        if (plain) {
            out->push_back(static_cast<char>(c));
        } else {
            out->push_back('%');
            out->push_back(kHex[c >> 4]);
            out->push_back(kHex[c & 15]);
        }
    }
}

// Digits only, value within [min, max].
bool parse_number(std::string_view text, long long min, long long max, long long* value)
{
    if (text.empty() || text.size() > 10)
        return false;
    for (char c : text)
        if (c < '0' || c > '9')
            return false;
    long long v = 0;
    auto res = std::from_chars(text.data(), text.data() + text.size(), v);
    if (res.ec != std::errc() || res.ptr != text.data() + text.size())
        return false;
    if (v < min || v > max)
        return false;
    *value = v;
    return true;
}

bool parse_db(std::string_view text, int* db, std::string* error)
{
    long long v = 0;
    if (!parse_number(text, 0, 2147483647, &v)) {
        *error = "invalid database number in Redis URL (expected 0..2147483647)";
        return false;
    }
    *db = static_cast<int>(v);
    return true;
}

bool is_host_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
}

bool is_ipv6_char(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
}

// Every character of text passes is_char (true for an empty text).
bool all_chars(std::string_view text, bool (*is_char)(char))
{
    return std::all_of(text.begin(), text.end(), is_char);
}

// "[user]:password" or "user" (percent-decoded). A user alone takes its password from
// jobbuf.redis_password_file (drain_session_configure refuses it without one).
bool parse_userinfo(std::string_view info, RedisEndpoint* ep, std::string* error)
{
    std::size_t colon = info.find(':');
    if (!percent_decode(info.substr(0, colon), &ep->user) ||
        (colon != std::string_view::npos && !percent_decode(info.substr(colon + 1), &ep->password))) {
        *error = "malformed percent-escape in Redis URL credentials";
        return false;
    }
    if (colon == std::string_view::npos) {
        if (ep->user.empty()) {
            *error = "empty user in Redis URL (write user@host, :password@host or user:password@host)";
            return false;
        }
        return true;
    }
    if (ep->password.empty()) {
        *error = ep->user.empty() ? "empty password in Redis URL"
                                  : "empty password in Redis URL (write user@host and set jobbuf.redis_password_file)";
        return false;
    }
    return true;
}

// host[:port][/db] or [v6][:port][/db]
bool parse_host_part(std::string_view rest, RedisEndpoint* ep, std::string* error)
{
    std::size_t i = 0;
    if (!rest.empty() && rest[0] == '[') {
        std::size_t close = rest.find(']');
        if (close == std::string_view::npos) {
            *error = "unterminated '[' in Redis URL host";
            return false;
        }
        std::string_view v6 = rest.substr(1, close - 1);
        std::size_t zone = v6.find('%');
        std::string_view addr = v6.substr(0, zone);
        if (addr.empty() || addr.find(':') == std::string_view::npos || !all_chars(addr, is_ipv6_char)) {
            *error = "invalid IPv6 address in Redis URL";
            return false;
        }
        if (zone != std::string_view::npos) {
            std::string_view z = v6.substr(zone + 1);
            if (z.empty() || !all_chars(z, is_host_char)) {
                *error = "invalid IPv6 zone in Redis URL";
                return false;
            }
        }
        ep->host.assign(addr);
        if (zone != std::string_view::npos) {
            // RFC 6874 writes the zone separator as "%25"; a bare "%" is accepted too.
            std::string_view z = v6.substr(zone + 1);
            if (z.size() > 2 && z.substr(0, 2) == "25")
                z.remove_prefix(2);
            ep->host += '%';
            ep->host.append(z);
        }
        i = close + 1;
    } else {
        while (i < rest.size() && is_host_char(rest[i]))
            ++i;
        if (i == 0) {
            *error = (rest.empty() || rest[0] == ':' || rest[0] == '/') ? "empty host in Redis URL"
                                                                        : "invalid host in Redis URL";
            return false;
        }
        ep->host.assign(rest.substr(0, i));
    }
    if (i < rest.size() && rest[i] == ':') {
        std::size_t start = ++i;
        while (i < rest.size() && rest[i] != '/')
            ++i;
        long long port = 0;
        if (!parse_number(rest.substr(start, i - start), 1, 65535, &port)) {
            *error = "invalid port in Redis URL (expected 1..65535)";
            return false;
        }
        ep->port = static_cast<int>(port);
    }
    if (i < rest.size() && rest[i] == '/') {
        std::string_view db = rest.substr(i + 1);
        if (!db.empty() && !parse_db(db, &ep->db, error))
            return false;
        i = rest.size();
    }
    if (i != rest.size()) {
        *error = "unexpected characters after the host in Redis URL";
        return false;
    }
    return true;
}

// Removes "[user[:password]@]" from the front of rest into ep. The last '@' ends the
// credentials: a password may contain unescaped '@' or '/'.
bool take_credentials(std::string_view* rest, RedisEndpoint* ep, std::string* error)
{
    std::size_t at = rest->rfind('@');
    if (at == std::string_view::npos)
        return true;
    if (!parse_userinfo(rest->substr(0, at), ep, error))
        return false;
    rest->remove_prefix(at + 1);
    return true;
}

bool parse_tcp(std::string_view rest, RedisEndpoint* ep, std::string* error)
{
    return take_credentials(&rest, ep, error) && parse_host_part(rest, ep, error);
}

// host[:port][,host[:port]...]/master[/db]
bool parse_sentinel(std::string_view rest, RedisEndpoint* ep, std::string* error)
{
    ep->kind = RedisEndpoint::Kind::Sentinel;
    if (!take_credentials(&rest, ep, error))
        return false;
    std::size_t slash = rest.find('/');
    std::string_view hosts = rest.substr(0, slash);
    std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    while (true) {
        std::size_t comma = hosts.find(',');
        RedisEndpoint one;
        one.port = kSentinelDefaultPort;
        if (!parse_host_part(hosts.substr(0, comma), &one, error))
            return false;
        ep->sentinels.push_back({one.host, one.port});
        if (comma == std::string_view::npos)
            break;
        hosts.remove_prefix(comma + 1);
    }
    std::size_t db_slash = path.find('/');
    std::string_view name = path.substr(0, db_slash);
    if (name.empty()) {
        *error = "Redis Sentinel URL must name the master: redis+sentinel://host[:port][,host[:port]...]/master[/db]";
        return false;
    }
    if (!all_chars(name, is_host_char)) {
        *error = "invalid master name in Redis Sentinel URL (letters, digits, '-', '.', '_')";
        return false;
    }
    ep->master_name.assign(name);
    ep->host.clear();
    ep->port = 0;
    if (db_slash != std::string_view::npos) {
        std::string_view db = path.substr(db_slash + 1);
        if (!db.empty() && !parse_db(db, &ep->db, error))
            return false;
    }
    return true;
}

// host[:port][,host[:port]...][/0]: the seeds of a Redis Cluster (which has one database).
bool parse_cluster(std::string_view rest, RedisEndpoint* ep, std::string* error)
{
    ep->kind = RedisEndpoint::Kind::Cluster;
    if (!take_credentials(&rest, ep, error))
        return false;
    std::size_t slash = rest.find('/');
    std::string_view hosts = rest.substr(0, slash);
    while (true) {
        std::size_t comma = hosts.find(',');
        RedisEndpoint one;
        if (!parse_host_part(hosts.substr(0, comma), &one, error))
            return false;
        ep->seeds.push_back({one.host, one.port});
        if (comma == std::string_view::npos)
            break;
        hosts.remove_prefix(comma + 1);
    }
    if (slash != std::string_view::npos) {
        std::string_view db = rest.substr(slash + 1);
        if (!db.empty() && !parse_db(db, &ep->db, error))
            return false;
    }
    if (ep->db != 0) {
        *error = "a Redis Cluster has only database 0: redis+cluster://host[:port][,host[:port]...][/0]";
        return false;
    }
    ep->host = ep->seeds.front().host;
    ep->port = ep->seeds.front().port;
    return true;
}

// unix://[user[:password]@]/path[?db=N]  (credentials, when present, end at the first "@/")
bool parse_unix(std::string_view rest, RedisEndpoint* ep, std::string* error)
{
    ep->kind = RedisEndpoint::Kind::Unix;
    ep->host.clear();
    ep->port = 0;
    if (!rest.empty() && rest[0] != '/') {
        std::size_t at = rest.find("@/");
        if (at == std::string_view::npos) {
            *error = "unix socket URL must be unix:///absolute/path[?db=N]";
            return false;
        }
        if (!parse_userinfo(rest.substr(0, at), ep, error))
            return false;
        rest.remove_prefix(at + 1);
    }
    std::size_t q = rest.find('?');
    std::string_view path = rest.substr(0, q);
    if (path.size() < 2 || path[0] != '/') {
        *error = "unix socket URL must be unix:///absolute/path[?db=N]";
        return false;
    }
    if (path.find('\0') != std::string_view::npos) {
        *error = "invalid unix socket path in Redis URL";
        return false;
    }
    ep->socket_path.assign(path);
    if (q != std::string_view::npos) {
        std::string_view query = rest.substr(q + 1);
        if (query.substr(0, 3) != "db=") {
            *error = "unix socket URL accepts only ?db=N";
            return false;
        }
        if (!parse_db(query.substr(3), &ep->db, error))
            return false;
    }
    return true;
}

bool starts_with_nocase(std::string_view s, std::string_view prefix)
{
    if (s.size() < prefix.size())
        return false;
    for (std::size_t i = 0; i < prefix.size(); ++i) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
        if (c != prefix[i])
            return false;
    }
    return true;
}

std::string bad_scheme_message(std::string_view url)
{
    std::size_t sep = url.find("://");
    std::string msg = "unsupported Redis URL";
    // Only a short word of letters is quoted back: whatever else stands there could be a secret.
    if (sep != std::string_view::npos && sep > 0 && sep <= 20) {
        std::string_view scheme = url.substr(0, sep);
        bool word = true;
        for (char c : scheme)
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+' || c == '-' || c == '.'))
                word = false;
        if (word) {
            msg = "unsupported Redis URL scheme \"";
            msg.append(scheme);
            msg += "\"";
        }
    }
    msg += ": expected redis[s]://[user[:password]@]host[:port][/db], unix:///path[?db=N] or "
           "redis[s]+sentinel://[user[:password]@]host[:port][,host[:port]...]/master[/db] or "
           "redis[s]+cluster://[user[:password]@]host[:port][,host[:port]...]";
    return msg;
}

}  // namespace

bool parse_redis_url(const char* url, RedisEndpoint* out, std::string* error) noexcept
{
    try {
        error->clear();
        if (url == nullptr || *url == '\0') {
            *error = "empty Redis URL";
            return false;
        }
        std::string_view text(url);
        RedisEndpoint ep;
        bool ok;
        if (starts_with_nocase(text, kRedisScheme)) {
            ok = parse_tcp(text.substr(kRedisScheme.size()), &ep, error);
        } else if (starts_with_nocase(text, kTlsScheme)) {
            ep.tls = true;
            ok = parse_tcp(text.substr(kTlsScheme.size()), &ep, error);
        } else if (starts_with_nocase(text, kSentinelScheme)) {
            ok = parse_sentinel(text.substr(kSentinelScheme.size()), &ep, error);
        } else if (starts_with_nocase(text, kTlsSentinelScheme)) {
            ep.tls = true;
            ok = parse_sentinel(text.substr(kTlsSentinelScheme.size()), &ep, error);
        } else if (starts_with_nocase(text, kClusterScheme)) {
            ok = parse_cluster(text.substr(kClusterScheme.size()), &ep, error);
        } else if (starts_with_nocase(text, kTlsClusterScheme)) {
            ep.tls = true;
            ok = parse_cluster(text.substr(kTlsClusterScheme.size()), &ep, error);
        } else if (starts_with_nocase(text, kUnixScheme)) {
            ok = parse_unix(text.substr(kUnixScheme.size()), &ep, error);
        } else {
            *error = bad_scheme_message(text);
            ok = false;
        }
        if (ok)
            *out = std::move(ep);
        return ok;
    } catch (...) {
        try {
            *error = "out of memory while parsing the Redis URL";
        } catch (...) {
        }
        return false;
    }
}

namespace {

void append_number(std::string* out, int value)
{
    char num[16];
    auto res = std::to_chars(num, num + sizeof num, value);
    out->append(num, res.ptr);
}

void append_host_port(std::string* out, const std::string& host, int port)
{
    bool v6 = host.find(':') != std::string::npos;
    if (v6)
        *out += '[';
    *out += host;
    if (v6)
        *out += ']';
    *out += ':';
    append_number(out, port);
}

}  // namespace

std::string RedisEndpoint::redacted() const
{
    std::string out;
    std::string credentials;
    if (!password.empty()) {
        percent_encode(user, &credentials);
        credentials += ":***@";
    } else if (!user.empty()) {
        percent_encode(user, &credentials);
        credentials += "@";
    }
    if (kind == Kind::Unix) {
        out = "unix://";
        out += credentials;
        out += socket_path;
        if (db != 0) {
            out += "?db=";
            append_number(&out, db);
        }
        return out;
    }
    out = tls ? "rediss" : "redis";
    out += kind == Kind::Sentinel ? "+sentinel://" : kind == Kind::Cluster ? "+cluster://" : "://";
    out += credentials;
    if (kind == Kind::Cluster) {
        for (std::size_t i = 0; i < seeds.size(); ++i) {
            if (i > 0)
                out += ',';
            append_host_port(&out, seeds[i].host, seeds[i].port);
        }
    } else if (kind == Kind::Sentinel) {
        for (std::size_t i = 0; i < sentinels.size(); ++i) {
            if (i > 0)
                out += ',';
            append_host_port(&out, sentinels[i].host, sentinels[i].port);
        }
        out += '/';
        out += master_name;
    } else {
        append_host_port(&out, host, port);
    }
    out += '/';
    append_number(&out, db);
    return out;
}

}  // namespace jobbuf::redis
