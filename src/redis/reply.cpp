// Classification of Redis error replies: transient ("try again later") versus job errors.
// Pure C++ regime.
#include "redis/regime.h"

#include <string_view>

#include "redis/reply.h"

namespace jobbuf::redis {

bool is_transient_error(const std::string& error_text) noexcept
{
    static constexpr std::string_view kTransient[] = {
        "OOM",        "LOADING",  "BUSY",        "MASTERDOWN", "READONLY",
        "NOREPLICAS", "TRYAGAIN", "CLUSTERDOWN", "MISCONF",    "EXECABORT",
    };
    std::string_view text(error_text);
    std::size_t end = text.find_first_of(" \t\r\n");
    std::string_view word = text.substr(0, end);
    for (std::string_view prefix : kTransient)
        if (word == prefix)
            return true;
    return false;
}

}  // namespace jobbuf::redis
