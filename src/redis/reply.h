// Pure C++ regime: a Redis reply as an owned value tree, and the outcome of a round trip.
#pragma once
#include <string>
#include <vector>

namespace jobbuf::redis {

struct RedisReply {
    enum class Type { Status, Error, Integer, String, Array, Nil };
    Type type = Type::Nil;
    std::string str;                   // Status, Error, String
    long long integer = 0;             // Integer
    std::vector<RedisReply> elements;  // Array

    bool is_error() const { return type == Type::Error; }
};

struct RedisStatus {
    enum class Code {
        Ok,
        ConnectFailed,   // resolve/connect/refused/unreachable
        AuthFailed,      // AUTH or SELECT refused
        Timeout,         // no progress within the timeout
        Interrupted,     // the IoWaiter asked us to stop
        IoError,         // reset, EOF, write error
        ProtocolError,   // unparsable reply
        RequestRefused,  // Redis answered "ERR Protocol error" (a bulk over proto-max-bulk-len)
                         // and closed the connection: the request can never succeed as it is
    };
    Code code = Code::Ok;
    std::string message;  // one line, never contains the password

    bool ok() const { return code == Code::Ok; }
    static RedisStatus success() { return {}; }
    static RedisStatus failure(Code c, std::string m) { return {c, std::move(m)}; }
};

// True for reply errors that say "try again later" (OOM, LOADING, BUSY, MASTERDOWN, READONLY,
// NOREPLICAS, TRYAGAIN, CLUSTERDOWN, MISCONF, EXECABORT): the job must stay staged. Any other
// error reply (WRONGTYPE, ERR ...) is a property of the job or its key: it goes to dead letters.
bool is_transient_error(const std::string& error_text) noexcept;

}  // namespace jobbuf::redis
