// RESP serialization of a pipeline of Redis commands (arrays of bulk strings), with large
// arguments referenced instead of copied. Pure C++ regime; callers run inside try blocks
// (std::string may throw std::bad_alloc).
#include "redis/regime.h"

#include <charconv>

#include "redis/command_pipeline.h"

namespace jobbuf::redis {
namespace {

void append_header(std::string* wire, char kind, std::size_t n)
{
    char buf[24];
    buf[0] = kind;
    auto res = std::to_chars(buf + 1, buf + sizeof buf - 2, n);
    res.ptr[0] = '\r';
    res.ptr[1] = '\n';
    wire->append(buf, static_cast<std::size_t>(res.ptr + 2 - buf));
}

}  // namespace

void CommandPipeline::add(std::initializer_list<std::string_view> args)
{
    std::size_t bytes = 16;
    for (std::string_view a : args)
        bytes += (a.size() < kReferenceAtLeast ? a.size() : 0) + 16;
    owned_.reserve(owned_.size() + bytes);
    begin(args.size());
    for (std::string_view a : args)
        arg(a);
}

void CommandPipeline::begin(std::size_t argc)
{
    append_header(&owned_, '*', argc);
    ++commands_;
}

void CommandPipeline::append_part(std::string_view part)
{
    if (part.size() >= kReferenceAtLeast) {
        references_.push_back(Reference{owned_.size(), part});
        referenced_bytes_ += part.size();
    } else {
        owned_.append(part.data(), part.size());
    }
}

void CommandPipeline::arg(std::string_view a)
{
    append_header(&owned_, '$', a.size());
    append_part(a);
    owned_.append("\r\n", 2);
}

void CommandPipeline::arg(std::string_view head, std::string_view tail)
{
    append_header(&owned_, '$', head.size() + tail.size());
    owned_.append(head.data(), head.size());
    append_part(tail);
    owned_.append("\r\n", 2);
}

std::vector<std::string_view> CommandPipeline::pieces() const
{
    std::vector<std::string_view> out;
    out.reserve(2 * references_.size() + 1);
    std::string_view owned(owned_);
    std::size_t from = 0;
    for (const Reference& ref : references_) {
        if (ref.owned_offset > from)
            out.push_back(owned.substr(from, ref.owned_offset - from));
        out.push_back(ref.bytes);
        from = ref.owned_offset;
    }
    if (owned.size() > from)
        out.push_back(owned.substr(from));
    return out;
}

std::string CommandPipeline::wire() const
{
    std::string out;
    out.reserve(size());
    for (std::string_view piece : pieces())
        out.append(piece.data(), piece.size());
    return out;
}

void CommandPipeline::clear()
{
    owned_.clear();
    references_.clear();
    referenced_bytes_ = 0;
    commands_ = 0;
}

}  // namespace jobbuf::redis
