// Pure C++ regime: the top-level field reader and string decoder of json_fields.h: a small
// scanner over JSON text that only finds where values start and end.
#include "redis/regime.h"

#include <charconv>

#include "redis/hex_digit.h"
#include "redis/json_fields.h"

namespace jobbuf::redis {
namespace {

void skip_space(std::string_view text, std::size_t* at)
{
    while (*at < text.size() && (text[*at] == ' ' || text[*at] == '\t' || text[*at] == '\n' || text[*at] == '\r'))
        ++*at;
}

// Past the string literal that starts at *at (on its opening quote).
bool skip_string(std::string_view text, std::size_t* at)
{
    std::size_t i = *at + 1;
    while (i < text.size()) {
        char c = text[i];
        if (c == '"') {
            *at = i + 1;
            return true;
        }
        i += c == '\\' ? 2 : 1;
    }
    return false;
}

// Past the value that starts at *at: a string, a container (brackets counted, strings skipped)
// or a scalar (up to the next delimiter).
bool skip_value(std::string_view text, std::size_t* at)
{
    if (*at >= text.size())
        return false;
    char c = text[*at];
    if (c == '"')
        return skip_string(text, at);
    if (c == '{' || c == '[') {
        int depth = 0;
        std::size_t i = *at;
        while (i < text.size()) {
            char d = text[i];
            if (d == '"') {
                if (!skip_string(text, &i))
                    return false;
                continue;
            }
            if (d == '{' || d == '[')
                ++depth;
            if (d == '}' || d == ']')
                --depth;
            ++i;
            if (depth == 0) {
                *at = i;
                return true;
            }
        }
        return false;
    }
    std::size_t i = *at;
    while (i < text.size() && text[i] != ',' && text[i] != '}' && text[i] != ']' && text[i] != ' ' && text[i] != '\n' &&
           text[i] != '\t' && text[i] != '\r')
        ++i;
    if (i == *at)
        return false;
    *at = i;
    return true;
}

bool read_hex4(std::string_view text, std::size_t at, unsigned* out)
{
    if (at + 4 > text.size())
        return false;
    unsigned v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
        int d = hex_digit(text[at + k]);
        if (d < 0)
            return false;
        v = v * 16 + static_cast<unsigned>(d);
    }
    *out = v;
    return true;
}

void append_utf8(unsigned cp, std::string* out)
{
    if (cp < 0x80) {
        out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

}  // namespace

bool json_object_fields(std::string_view object, const std::string_view* names, std::size_t count,
                        std::string_view* values)
{
    for (std::size_t k = 0; k < count; ++k)
        values[k] = std::string_view();
    std::size_t at = 0;
    skip_space(object, &at);
    if (at >= object.size() || object[at] != '{')
        return false;
    ++at;
    skip_space(object, &at);
    if (at < object.size() && object[at] == '}')
        return true;
    for (;;) {
        skip_space(object, &at);
        std::size_t key_start = at;
        if (at >= object.size() || object[at] != '"' || !skip_string(object, &at))
            return false;
        std::string_view key = object.substr(key_start + 1, at - key_start - 2);
        skip_space(object, &at);
        if (at >= object.size() || object[at] != ':')
            return false;
        ++at;
        skip_space(object, &at);
        std::size_t value_start = at;
        if (!skip_value(object, &at))
            return false;
        for (std::size_t k = 0; k < count; ++k)
            if (key == names[k])
                values[k] = object.substr(value_start, at - value_start);
        skip_space(object, &at);
        if (at >= object.size())
            return false;
        if (object[at] == '}')
            return true;
        if (object[at] != ',')
            return false;
        ++at;
    }
}

bool json_string_value(std::string_view literal, std::string* out)
{
    out->clear();
    if (literal.size() < 2 || literal.front() != '"' || literal.back() != '"')
        return false;
    std::size_t i = 1;
    const std::size_t end = literal.size() - 1;
    while (i < end) {
        char c = literal[i];
        if (c != '\\') {
            out->push_back(c);
            ++i;
            continue;
        }
        if (i + 1 >= end)
            return false;
        char e = literal[i + 1];
        i += 2;
        switch (e) {
            case '"':
                out->push_back('"');
                break;
            case '\\':
                out->push_back('\\');
                break;
            case '/':
                out->push_back('/');
                break;
            case 'b':
                out->push_back('\b');
                break;
            case 'f':
                out->push_back('\f');
                break;
            case 'n':
                out->push_back('\n');
                break;
            case 'r':
                out->push_back('\r');
                break;
            case 't':
                out->push_back('\t');
                break;
            case 'u': {
                unsigned cp = 0;
                if (!read_hex4(literal, i, &cp))
                    return false;
                i += 4;
                if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate needs its low half
                    unsigned low = 0;
                    if (i + 6 > end || literal[i] != '\\' || literal[i + 1] != 'u' ||
                        !read_hex4(literal, i + 2, &low) || low < 0xDC00 || low >= 0xE000)
                        return false;
                    i += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                } else if (cp >= 0xDC00 && cp < 0xE000) {
                    return false;
                }
                append_utf8(cp, out);
                break;
            }
            default:
                return false;
        }
    }
    return true;
}

bool json_small_integer(std::string_view text, long long max, long long* value)
{
    if (text.empty() || text.size() > 18)
        return false;
    for (char c : text)
        if (c < '0' || c > '9')
            return false;
    long long v = 0;
    auto res = std::from_chars(text.data(), text.data() + text.size(), v);
    if (res.ec != std::errc() || v > max)
        return false;
    *value = v;
    return true;
}

}  // namespace jobbuf::redis
