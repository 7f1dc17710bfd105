// Pure C++ regime: a pipeline of Redis commands serialized once into RESP, ready to write.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace jobbuf::redis {

class CommandBatch {
public:
    // Appends one command; each argument is sent as one bulk string (binary safe, so nothing
    // in a payload or a key can be interpreted as another command).
    void add(std::initializer_list<std::string_view> args);

    // Incremental form for commands with many arguments: begin(n) then exactly n arg() calls.
    void begin(std::size_t argc);
    void arg(std::string_view a);

    std::size_t command_count() const { return commands_; }
    const std::string& wire() const { return wire_; }
    void clear() { wire_.clear(); commands_ = 0; }

private:
    std::string wire_;
    std::size_t commands_ = 0;
};

}  // namespace jobbuf::redis
