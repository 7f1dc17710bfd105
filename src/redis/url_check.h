// Pure C++ regime: jobbuf.redis_url validation with plain C results, for GUC check hooks
// (which must not hold C++ objects in a frame that can ereport).
#pragma once
#include <cstddef>

namespace jobbuf::redis {

// True when url parses; otherwise false with a one-line reason (never the password) in reason.
// *has_password (when not null) says whether the parsed URL carries a password.
bool check_redis_url(const char* url, char* reason, std::size_t reason_len, bool* has_password = nullptr) noexcept;

}  // namespace jobbuf::redis
