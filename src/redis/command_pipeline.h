// Pure C++ regime: a pipeline of Redis commands serialized into RESP, ready to write. Small
// arguments are copied into the pipeline's own buffer; large ones (job payloads) are referenced
// where they already are, so a pipeline never holds a second copy of its payloads.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace jobbuf::redis {

class CommandPipeline {
public:
    // Arguments at least this long are referenced rather than copied (see arg()).
    static constexpr std::size_t kReferenceAtLeast = 16 * 1024;

    // Appends one command; each argument is sent as one bulk string (binary safe, so nothing
    // in a payload or a key can be interpreted as another command).
    void add(std::initializer_list<std::string_view> args);

    // Incremental form for commands with many arguments: begin(n) then exactly n arg() calls.
    // An argument of kReferenceAtLeast bytes or more is not copied: its bytes must stay valid and
    // unchanged until the pipeline is sent or cleared.
    void begin(std::size_t argc);
    void arg(std::string_view a);
    // One argument made of two parts sent back to back (head copied; tail referenced like arg()).
    void arg(std::string_view head, std::string_view tail);

    std::size_t command_count() const { return commands_; }
    // The bytes to write, in order: the pipeline's own buffer interleaved with referenced
    // arguments.
    std::vector<std::string_view> pieces() const;
    std::size_t size() const { return owned_.size() + referenced_bytes_; }
    // The whole pipeline as one string (tests and small pipelines; copies referenced arguments).
    std::string wire() const;
    void clear();

private:
    void append_part(std::string_view part);

    struct Reference {
        std::size_t owned_offset;  // where in owned_ the referenced bytes belong
        std::string_view bytes;
    };
    std::string owned_;
    std::vector<Reference> references_;
    std::size_t referenced_bytes_ = 0;
    std::size_t commands_ = 0;
};

}  // namespace jobbuf::redis
