// Pure C++ regime: SessionReport, what every call of the drain session (drain_session.h) answers,
// as plain data: a status and a one-line message. Below both the session's interface
// (drain_session.h) and its state (session_state.h).
#pragma once
#include <cstddef>

namespace jobbuf::redis {

constexpr std::size_t kMessageLen = 1024;  // the lease's Held message names two clusters and two ways out

struct SessionReport {
    enum class Status {
        Ok,           // the call did what it said (deliver: results[] are valid)
        Unavailable,  // cannot connect / connection lost / timeout: retry after backoff
        Refused,      // Redis answered but refused the whole unit (OOM, EXECABORT): retry later
        Interrupted,  // shutdown requested while waiting
        BadConfig,    // jobbuf.redis_url does not parse
        Held,         // another cluster holds the delivery lease (drain_session_set_lease): nothing sent
        Full,         // the Redis node is at jobbuf.redis_memory_limit (or evicts, under
                      // jobbuf.redis_require_noeviction): nothing sent, the jobs wait staged
    };
    Status status = Status::Ok;
    char message[kMessageLen] = {0};  // one line, never the password
};

}  // namespace jobbuf::redis
