// Pure C++ regime: the base64 encoder of base64.h.
#include "redis/regime.h"

#include "redis/base64.h"

namespace jobbuf::redis {

void append_base64(std::string_view bytes, std::string* out)
{
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out->reserve(out->size() + base64_size(bytes.size()));
    std::size_t i = 0;
    auto byte = [&](std::size_t k) { return static_cast<unsigned>(static_cast<unsigned char>(bytes[k])); };
    for (; i + 3 <= bytes.size(); i += 3) {
        unsigned v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
        out->push_back(kAlphabet[v >> 18]);
        out->push_back(kAlphabet[(v >> 12) & 63]);
        out->push_back(kAlphabet[(v >> 6) & 63]);
        out->push_back(kAlphabet[v & 63]);
    }
    std::size_t rest = bytes.size() - i;
    if (rest == 0)
        return;
    unsigned v = byte(i) << 16 | (rest == 2 ? byte(i + 1) << 8 : 0);
    out->push_back(kAlphabet[v >> 18]);
    out->push_back(kAlphabet[(v >> 12) & 63]);
    out->push_back(rest == 2 ? kAlphabet[(v >> 6) & 63] : '=');
    out->push_back('=');
}

}  // namespace jobbuf::redis
