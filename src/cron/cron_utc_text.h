// Pure C++ regime: a tick as SPEC writes it in unique_key and in every id derived from it, UTC
// ISO 8601 to the second with a Z: 2026-03-29T01:00:00Z.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace jobbuf::cron {

// Room for the text of any int64 Unix time and its NUL (years 0-9999 take 20 characters).
constexpr std::size_t kUtcTextSize = 40;

// Writes the text of unix_seconds into out and returns its length. Years 0 to 9999 are written
// with four digits; other years with as many digits as they need and a '-' when negative (ISO
// 8601's expanded form without the '+'), which next_tick never produces.
std::size_t format_utc(std::int64_t unix_seconds, char (&out)[kUtcTextSize]) noexcept;

// The same as a string (may throw std::bad_alloc).
std::string format_utc(std::int64_t unix_seconds);

}  // namespace jobbuf::cron
