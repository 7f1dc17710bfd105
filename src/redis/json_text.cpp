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
        case '"': out->append("\\\""); break;
        case '\\': out->append("\\\\"); break;
        case '\b': out->append("\\b"); break;
        case '\f': out->append("\\f"); break;
        case '\n': out->append("\\n"); break;
        case '\r': out->append("\\r"); break;
        case '\t': out->append("\\t"); break;
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
    if (!std::isfinite(epoch_seconds) || std::fabs(epoch_seconds) > 1e15) epoch_seconds = 0.0;
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

}  // namespace jobbuf::redis
