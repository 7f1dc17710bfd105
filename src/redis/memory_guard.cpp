// The memory guard's decisions: jobbuf.redis_memory_limit's text, an `INFO memory` reply, and
// from both the limit, the hold (with its 90 % hysteresis) and the room the drain may fill.
// Pure C++ regime. The messages quote the setting's text (it is no secret) and no reply value.
#include "redis/regime.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>

#include "redis/memory_guard.h"

namespace jobbuf::redis {
namespace {

constexpr std::string_view kValidForms =
    "expected off, a fraction of maxmemory (0 < f <= 1: 0.8, .5, 1) or a size with a "
    "unit (512MB, 1GB, 64kB, 100 MB; units B, kB, MB, GB, TB, as PostgreSQL "
    "writes them)";
constexpr std::uint64_t kMaxLimitBytes = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
constexpr std::size_t kShownChars = 40;  // of the refused text, in a message
constexpr std::uint64_t kBillion = 1000000000;

struct Unit {
    std::string_view name;
    std::uint64_t bytes;
};
constexpr Unit kUnits[] = {
    {"B", 1}, {"kB", 1ULL << 10}, {"MB", 1ULL << 20}, {"GB", 1ULL << 30}, {"TB", 1ULL << 40},
};

bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

std::string_view trim(std::string_view s)
{
    while (!s.empty() && is_blank(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && is_blank(s.back()))
        s.remove_suffix(1);
    return s;
}

char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool equals_nocase(std::string_view a, std::string_view b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower(b[i]))
            return false;
    return true;
}

// text between double quotes, as a one-line message may show it: printable ASCII only ('?' for
// anything else), at most kShownChars of it.
std::string quoted(std::string_view text)
{
    std::string out = "\"";
    for (std::size_t i = 0; i < text.size() && i < kShownChars; ++i) {
        char c = text[i];
        out += (c >= 0x20 && c <= 0x7e) ? c : '?';
    }
    if (text.size() > kShownChars)
        out += "...";
    out += '"';
    return out;
}

bool refuse_limit(std::string_view text, std::string_view reason, std::string* error)
{
    *error = "invalid memory limit ";
    *error += quoted(text);
    *error += ": ";
    error->append(reason);
    *error += "; ";
    error->append(kValidForms);
    return false;
}

// The length of the decimal number that starts s: digits, '.', digits, with a digit on at least
// one side of the point (".5", "5.", "5"); 0 when s does not start with one.
std::size_t number_length(std::string_view s, bool* has_point)
{
    std::size_t i = 0;
    while (i < s.size() && is_digit(s[i]))
        ++i;
    std::size_t digits = i;
    *has_point = i < s.size() && s[i] == '.';
    if (*has_point) {
        std::size_t start = ++i;
        while (i < s.size() && is_digit(s[i]))
            ++i;
        digits += i - start;
    }
    return digits == 0 ? 0 : i;
}

bool to_double(std::string_view number, double* value)
{
    auto res = std::from_chars(number.data(), number.data() + number.size(), *value);
    return res.ec == std::errc() && res.ptr == number.data() + number.size() && std::isfinite(*value);
}

bool to_u64(std::string_view digits, std::uint64_t* value)
{
    if (digits.empty())
        return false;
    for (char c : digits)
        if (!is_digit(c))
            return false;
    auto res = std::from_chars(digits.data(), digits.data() + digits.size(), *value);
    return res.ec == std::errc() && res.ptr == digits.data() + digits.size();
}

bool parse_fraction(std::string_view text, std::string_view number, MemoryLimit* out, std::string* error)
{
    double f = 0;
    if (!to_double(number, &f) || !(f > 0 && f <= 1))
        return refuse_limit(text,
                            "a bare number is a fraction of maxmemory, greater than 0 and at most 1 (a size needs a "
                            "unit: 512MB; off turns the guard off)",
                            error);
    out->kind = MemoryLimit::Kind::Fraction;
    out->fraction = f;
    out->bytes = 0;
    return true;
}

bool parse_size(std::string_view text, std::string_view number, bool has_point, std::string_view unit_text,
                MemoryLimit* out, std::string* error)
{
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits)
        if (u.name == unit_text)
            unit = &u;
    if (unit == nullptr) {
        for (const Unit& u : kUnits)
            if (equals_nocase(u.name, unit_text))
                return refuse_limit(text, "units are case-sensitive, as in PostgreSQL: B, kB, MB, GB, TB", error);
        return refuse_limit(text, "unknown unit " + quoted(unit_text), error);
    }
    const std::string too_large = "a size is at most " + std::to_string(kMaxLimitBytes) + " bytes";
    std::uint64_t bytes = 0;
    if (!has_point) {
        std::uint64_t count = 0;
        if (!to_u64(number, &count) || count > kMaxLimitBytes / unit->bytes)
            return refuse_limit(text, too_large, error);
        bytes = count * unit->bytes;
    } else {
        // As PostgreSQL takes "1.5GB": the fraction of the unit, rounded to the byte.
        double count = 0;
        if (!to_double(number, &count))
            return refuse_limit(text, too_large, error);
        double b = std::rint(count * static_cast<double>(unit->bytes));
        if (!(b < 9223372036854775808.0))  // 2^63: the first value past INT64_MAX
            return refuse_limit(text, too_large, error);
        bytes = static_cast<std::uint64_t>(b);
    }
    if (bytes == 0)
        return refuse_limit(text, "a size is at least 1 byte (off turns the guard off)", error);
    out->kind = MemoryLimit::Kind::Size;
    out->fraction = 0;
    out->bytes = bytes;
    return true;
}

// floor(fraction * maxmemory), the fraction counted in billionths so that "0.8" or "0.29" give
// the exact byte (a double product can land one byte short); at least 1 byte.
std::uint64_t fraction_of(std::uint64_t maxmemory, double fraction)
{
    std::uint64_t ppb = kBillion;
    if (!(fraction > 0))
        ppb = 1;
    else if (fraction < 1)
        ppb = static_cast<std::uint64_t>(std::llround(fraction * static_cast<double>(kBillion)));
    if (ppb < 1)
        ppb = 1;
    if (ppb > kBillion)
        ppb = kBillion;
    // maxmemory = q * 1e9 + r: q * ppb <= maxmemory and r * ppb < 1e18, so nothing overflows.
    std::uint64_t q = maxmemory / kBillion;
    std::uint64_t r = maxmemory % kBillion;
    std::uint64_t bytes = q * ppb + r * ppb / kBillion;
    return bytes == 0 ? 1 : bytes;
}

// Redis writes its policies in lower case with '-' ("noeviction", "allkeys-lru", "volatile-ttl").
bool is_policy_name(std::string_view value)
{
    if (value.empty() || value.size() >= sizeof(RedisMemory{}.maxmemory_policy))
        return false;
    for (char c : value)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' || c == '_'))
            return false;
    return true;
}

bool refuse_reply(std::string_view reason, std::string* error)
{
    *error = "unexpected INFO memory reply: ";
    error->append(reason);
    return false;
}

}  // namespace

bool parse_memory_limit(std::string_view text, MemoryLimit* out, std::string* error) noexcept
{
    try {
        error->clear();
        std::string_view t = trim(text);
        if (t.empty())
            return refuse_limit(t, "empty", error);
        if (equals_nocase(t, "off")) {
            *out = MemoryLimit{};
            return true;
        }
        bool has_point = false;
        std::size_t n = number_length(t, &has_point);
        if (n == 0)
            return refuse_limit(t, "neither off nor a number", error);
        std::string_view number = t.substr(0, n);
        std::string_view unit = trim(t.substr(n));
        MemoryLimit parsed;
        bool ok = unit.empty() ? parse_fraction(t, number, &parsed, error)
                               : parse_size(t, number, has_point, unit, &parsed, error);
        if (ok)
            *out = parsed;
        return ok;
    } catch (...) {
        try {
            *error = "out of memory while parsing the memory limit";
        } catch (...) {
        }
        return false;
    }
}

bool check_memory_limit(const char* text, char* reason, std::size_t reason_len) noexcept
{
    MemoryLimit limit;
    std::string error;
    if (parse_memory_limit(text != nullptr ? text : "", &limit, &error))
        return true;
    if (reason_len > 0) {
        std::size_t n = error.size() < reason_len - 1 ? error.size() : reason_len - 1;
        std::memcpy(reason, error.data(), n);
        reason[n] = '\0';
    }
    return false;
}

bool parse_info_memory(std::string_view reply, RedisMemory* out, std::string* error) noexcept
{
    try {
        error->clear();
        RedisMemory parsed;
        bool has_used = false;
        bool has_maxmemory = false;
        std::size_t pos = 0;
        while (pos < reply.size()) {
            std::size_t nl = reply.find('\n', pos);
            std::string_view line = reply.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
            pos = nl == std::string_view::npos ? reply.size() : nl + 1;
            if (!line.empty() && line.back() == '\r')
                line.remove_suffix(1);
            if (line.empty() || line.front() == '#')
                continue;
            std::size_t colon = line.find(':');
            if (colon == std::string_view::npos)
                continue;
            std::string_view key = line.substr(0, colon);
            std::string_view value = line.substr(colon + 1);
            if (key == "used_memory") {
                if (!to_u64(value, &parsed.used_memory))
                    return refuse_reply("used_memory is not an unsigned number", error);
                has_used = true;
            } else if (key == "maxmemory") {
                if (!to_u64(value, &parsed.maxmemory))
                    return refuse_reply("maxmemory is not an unsigned number", error);
                has_maxmemory = true;
            } else if (key == "mem_not_counted_for_evict") {
                if (!to_u64(value, &parsed.not_counted_for_evict))
                    return refuse_reply("mem_not_counted_for_evict is not an unsigned number", error);
                parsed.not_counted_reported = true;
            } else if (key == "maxmemory_policy") {
                if (!is_policy_name(value))
                    return refuse_reply("maxmemory_policy is not a policy name", error);
                std::memset(parsed.maxmemory_policy, 0, sizeof parsed.maxmemory_policy);
                std::memcpy(parsed.maxmemory_policy, value.data(), value.size());
            }
        }
        if (!has_used)
            return refuse_reply("no used_memory field", error);
        if (!has_maxmemory)
            return refuse_reply("no maxmemory field", error);
        *out = parsed;
        return true;
    } catch (...) {
        try {
            *error = "out of memory while parsing the INFO memory reply";
        } catch (...) {
        }
        return false;
    }
}

MemoryVerdict evaluate(const MemoryLimit& limit, const RedisMemory& memory, bool held_before) noexcept
{
    MemoryVerdict v;
    // What Redis compares with maxmemory before it evicts or answers OOM.
    v.counted_bytes =
        memory.used_memory > memory.not_counted_for_evict ? memory.used_memory - memory.not_counted_for_evict : 0;
    // jobbuf's keys carry no TTL. The volatile-* policies evict only keys that have one, so they
    // never evict jobbuf's keys (such a Redis answers OOM, as under noeviction); an allkeys-*
    // policy evicts any key, delivered jobs included, once maxmemory is reached.
    std::string_view policy = memory.policy();
    v.evicts_jobs = memory.maxmemory > 0 && policy.substr(0, 8) == "allkeys-";

    switch (limit.kind) {
        case MemoryLimit::Kind::Size:
            v.basis = LimitBasis::Size;
            v.limit_bytes = limit.bytes == 0 ? 1 : limit.bytes;
            break;
        case MemoryLimit::Kind::Fraction:
            if (memory.maxmemory == 0) {
                v.basis = LimitBasis::NoMaxmemory;
                return v;
            }
            // A Redis that evicts makes room by evicting: a fraction of maxmemory would hold
            // delivery for good, since such a Redis sits at maxmemory.
            if (policy != "noeviction") {
                v.basis = LimitBasis::PolicyNotNoeviction;
                return v;
            }
            v.basis = LimitBasis::Fraction;
            v.limit_bytes = fraction_of(memory.maxmemory, limit.fraction);
            break;
        case MemoryLimit::Kind::Off:
        default:
            v.basis = LimitBasis::Off;
            return v;
    }

    v.limited = true;
    // ceil(0.9 * limit) without overflow: limit = 10q + r.
    std::uint64_t q = v.limit_bytes / 10;
    std::uint64_t r = v.limit_bytes % 10;
    v.resume_below = 9 * q + (9 * r + 9) / 10;
    // Hysteresis: at or above the limit holds; a hold ends only below 90 % of the limit, so that
    // a Redis hovering at its limit is not fed and starved on every reading.
    v.held = held_before ? v.counted_bytes >= v.resume_below : v.counted_bytes >= v.limit_bytes;
    // Not held implies counted < resume_below <= limit, or counted < limit.
    v.room_bytes = v.held ? 0 : v.limit_bytes - v.counted_bytes;
    v.ratio = static_cast<double>(v.counted_bytes) / static_cast<double>(v.limit_bytes);
    return v;
}

bool job_exceeds_limit(std::size_t job_bytes, const MemoryVerdict& verdict) noexcept
{
    return verdict.limited && static_cast<std::uint64_t>(job_bytes) > verdict.limit_bytes;
}

std::size_t bytes_to_send(std::size_t batch_bytes, const MemoryVerdict& verdict) noexcept
{
    if (!verdict.limited)
        return batch_bytes;
    if (verdict.held)
        return 0;
    return static_cast<std::uint64_t>(batch_bytes) < verdict.room_bytes ? batch_bytes
                                                                        : static_cast<std::size_t>(verdict.room_bytes);
}

}  // namespace jobbuf::redis
