// Pure C++ regime: a Unix time as the UTC ISO 8601 text of a tick (2026-03-29T01:00:00Z).
#include "cron/regime.h"

#include "cron/cron_utc_text.h"

#include <cinttypes>
#include <cstdio>

#include "cron/cron_calendar.h"

namespace jobbuf::cron {

std::size_t format_utc(std::int64_t unix_seconds, char (&out)[kUtcTextSize]) noexcept
{
    const CivilTime t = civil_from_seconds(unix_seconds);
    const int n = std::snprintf(out, sizeof out, "%s%04" PRId64 "-%02d-%02dT%02d:%02d:%02dZ",
                                t.date.year < 0 ? "-" : "", t.date.year < 0 ? -t.date.year : t.date.year, t.date.month,
                                t.date.day, t.hour, t.minute, t.second);
    return n < 0 ? 0 : static_cast<std::size_t>(n);
}

std::string format_utc(std::int64_t unix_seconds)
{
    char text[kUtcTextSize];
    const std::size_t n = format_utc(unix_seconds, text);
    return std::string(text, n);
}

}  // namespace jobbuf::cron
