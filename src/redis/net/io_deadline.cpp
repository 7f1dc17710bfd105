// Pure C++ regime: deadlines and bounded socket waits for every Redis byte stream (see
// io_deadline.h).
#include "redis/regime.h"

#include <charconv>
#include <cstring>

#include "redis/net/io_deadline.h"

namespace jobbuf::redis {
namespace {

IoDeadline::Clock::time_point limit_from_now(long ms)
{
    return IoDeadline::Clock::now() + std::chrono::milliseconds(ms > 0 ? ms : 0);
}

std::string ms_text(long ms)
{
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, ms);
    return std::string(buf, res.ptr) + " ms";
}

}  // namespace

IoDeadline::IoDeadline(long ms, Kind k) : at(limit_from_now(ms)), timeout_ms(ms), kind(k) {}

void IoDeadline::progressed(long queued_now)
{
    if (kind != Kind::NoProgress)
        return;
    at = limit_from_now(timeout_ms);
    queued_for_peer = queued_now;
}

bool IoDeadline::peer_took_bytes(long queued_now)
{
    if (kind != Kind::NoProgress || queued_now >= queued_for_peer)
        return false;
    progressed(queued_now);
    return true;
}

long IoDeadline::remaining_ms() const
{
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(at - Clock::now()).count();
    if (left <= 0)
        return 0;
    return static_cast<long>((left + 999) / 1000);
}

RedisStatus io_failure(RedisStatus::Code code, const char* what, const std::string& detail) noexcept
{
    RedisStatus st;
    st.code = code;
    try {
        st.message = what;
        if (!detail.empty()) {
            st.message += ": ";
            st.message += detail;
        }
        for (char& c : st.message)
            if (c == '\r' || c == '\n')
                c = ' ';
    } catch (...) {
        st.message.clear();
    }
    return st;
}

std::string errno_text(int err)
{
    return std::string(std::strerror(err));
}

RedisStatus wait_for_socket(IoWaiter& waiter, int fd, bool for_read, bool for_write, const IoDeadline& deadline,
                            const char* doing)
{
    long ms = deadline.remaining_ms();
    WaitResult r = ms > 0 ? waiter.wait(fd, for_read, for_write, ms) : WaitResult::TimedOut;
    switch (r) {
        case WaitResult::Ready:
            return RedisStatus::success();
        case WaitResult::Interrupted:
            return io_failure(RedisStatus::Code::Interrupted, "interrupted while", doing);
        case WaitResult::TimedOut:
            break;
    }
    std::string what = "timed out after " + ms_text(deadline.timeout_ms) +
                       (deadline.kind == IoDeadline::Kind::NoProgress ? " without progress" : "") + " while " + doing;
    return io_failure(RedisStatus::Code::Timeout, what.c_str());
}

}  // namespace jobbuf::redis
