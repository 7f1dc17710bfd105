// JSON string escaping and locale-independent epoch timestamp formatting for the encoders.
// Pure C++ regime.
#include "redis/regime.h"

#include <charconv>
#include <cmath>

#include "redis/json_text.h"

namespace jobbuf::redis {

void append_json_string(std::string_view text, std::string* out)
{
    static constexpr char kHex[] = "0123456789abcdef";
    out->push_back('"');
    for (char ch : text) {
        unsigned char c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"':
                out->append("\\\"");
                break;
            case '\\':
                out->append("\\\\");
                break;
            case '\b':
                out->append("\\b");
                break;
            case '\f':
                out->append("\\f");
                break;
            case '\n':
                out->append("\\n");
                break;
            case '\r':
                out->append("\\r");
                break;
            case '\t':
                out->append("\\t");
                break;
            default:
                if (c < 0x20 || c == 0x7f) {
                    out->append("\\u00");
                    out->push_back(kHex[c >> 4]);
                    out->push_back(kHex[c & 15]);
                } else {
                    out->push_back(ch);
                }
        }
    }
    out->push_back('"');
}

void append_epoch_seconds(double epoch_seconds, std::string* out)
{
    if (!std::isfinite(epoch_seconds) || std::fabs(epoch_seconds) > 1e15)
        epoch_seconds = 0.0;
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, epoch_seconds, std::chars_format::fixed, 6);
    out->append(buf, res.ptr);
}

void append_epoch_millis(double epoch_seconds, std::string* out)
{
    double ms = epoch_seconds * 1000.0;
    long long v = (std::isfinite(ms) && std::fabs(ms) < 9e15) ? std::llround(ms) : 0;
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    out->append(buf, res.ptr);
}

void append_hex(std::uint64_t value, int digits, std::string* out)
{
    static constexpr char kHex[] = "0123456789abcdef";
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4)
        out->push_back(kHex[(value >> shift) & 15]);
}

void append_iso8601_utc(double epoch_seconds, std::string* out)
{
    if (!std::isfinite(epoch_seconds) || epoch_seconds < 0 || epoch_seconds > 253402300799.0)
        epoch_seconds = 0;
    long long micros = std::llround(epoch_seconds * 1e6);
    long long secs = micros / 1000000;
    long long frac = micros % 1000000;
    long long days = secs / 86400;
    long long rem = secs % 86400;
    // days since 1970-01-01 to a civil date (Howard Hinnant's algorithm)
    long long z = days + 719468;
    long long era = z / 146097;
    long long doe = z - era * 146097;
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long long mp = (5 * doy + 2) / 153;
    long long day = doy - (153 * mp + 2) / 5 + 1;
    long long month = mp < 10 ? mp + 3 : mp - 9;
    long long year = yoe + era * 400 + (month <= 2 ? 1 : 0);
    auto two = [out](long long v, char after) {
        out->push_back(static_cast<char>('0' + v / 10));
        out->push_back(static_cast<char>('0' + v % 10));
        if (after != 0)
            out->push_back(after);
    };
    two(year / 100, 0);
    two(year % 100, '-');
    two(month, '-');
    two(day, 'T');
    two(rem / 3600, ':');
    two(rem / 60 % 60, ':');
    two(rem % 60, '.');
    for (long long div = 100000; div > 0; div /= 10)
        out->push_back(static_cast<char>('0' + frac / div % 10));
    out->append("+00:00");
}

}  // namespace jobbuf::redis
