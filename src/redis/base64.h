// Pure C++ regime: standard base64 (RFC 4648 alphabet, padded), as Celery's messages carry
// their body.
#pragma once
#include <string>
#include <string_view>

namespace jobbuf::redis {

// Appends the base64 text of bytes to *out. May throw std::bad_alloc.
void append_base64(std::string_view bytes, std::string* out);

// The length of the base64 text of n bytes.
constexpr std::size_t base64_size(std::size_t n)
{
    return (n + 2) / 3 * 4;
}

}  // namespace jobbuf::redis
