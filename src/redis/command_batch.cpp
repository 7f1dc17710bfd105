// RESP serialization of a pipeline of Redis commands (arrays of bulk strings).
// Pure C++ regime; callers run inside try blocks (std::string may throw std::bad_alloc).
#include "redis/regime.h"

#include <charconv>

#include "redis/command_batch.h"

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

void CommandBatch::add(std::initializer_list<std::string_view> args)
{
    std::size_t bytes = 16;
    for (std::string_view a : args) bytes += a.size() + 16;
    wire_.reserve(wire_.size() + bytes);
    begin(args.size());
    for (std::string_view a : args) arg(a);
}

void CommandBatch::begin(std::size_t argc)
{
    append_header(&wire_, '*', argc);
    ++commands_;
}

void CommandBatch::arg(std::string_view a)
{
    append_header(&wire_, '$', a.size());
    wire_.append(a.data(), a.size());
    wire_.append("\r\n", 2);
}

}  // namespace jobbuf::redis
