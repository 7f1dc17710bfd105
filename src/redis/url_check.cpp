// Pure C++ regime: check_redis_url, the C-shaped entry used by the jobbuf.redis_url check hook.
#include "redis/regime.h"

#include <cstdio>
#include <string>

#include "redis/endpoint.h"
#include "redis/url_check.h"

namespace jobbuf::redis {

bool check_redis_url(const char* url, char* reason, std::size_t reason_len, bool* has_password) noexcept
{
    try {
        RedisEndpoint endpoint;
        std::string error;
        if (parse_redis_url(url, &endpoint, &error)) {
            if (has_password != nullptr)
                *has_password = !endpoint.password.empty();
            return true;
        }
        std::snprintf(reason, reason_len, "%s", error.c_str());
        return false;
    } catch (...) {
        std::snprintf(reason, reason_len, "out of memory while parsing jobbuf.redis_url");
        return false;
    }
}

}  // namespace jobbuf::redis
