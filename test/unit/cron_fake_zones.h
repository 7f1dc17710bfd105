// Time zones for the periodic-job tests, written out by rule so that the tests need no tz data:
// each is an OffsetFn (src/cron/cron_next_tick.h) whose context is a FakeZone. The rules follow
// the real zones' current ones (checked against zdump for 2026 in cron_next_tick_test.cpp).
#pragma once
#include <cstdint>

#include "cron/cron_calendar.h"
#include "cron/cron_next_tick.h"

namespace jobbuf::cron::test {

// Unix time of a UTC civil time.
constexpr std::int64_t utc(std::int64_t y, int mo, int d, int h = 0, int mi = 0, int s = 0)
{
    return seconds_from_civil(y, mo, d, h, mi, s);
}

// Days since 1970 of the last Sunday of a month, and of the first Sunday on or after a day.
constexpr std::int64_t last_sunday(std::int64_t y, int mo)
{
    const std::int64_t last = days_from_civil(y, mo, days_in_month(y, mo));
    return last - weekday_from_days(last);
}
constexpr std::int64_t sunday_on_or_after(std::int64_t y, int mo, int d)
{
    const std::int64_t day = days_from_civil(y, mo, d);
    return day + (7 - weekday_from_days(day)) % 7;
}

enum class FakeKind {
    kBerlin,      // +1, +2 from the last Sunday of March 01:00 UTC to the last Sunday of October 01:00 UTC
    kLordHowe,    // +10:30, +11 from the first Sunday of October 02:00 local (15:30 UTC the day
                  // before) to the first Sunday of April 02:00 local (15:00 UTC the day before)
    kSantiago,    // -4, -3 from the Sunday on or after Sep 2 04:00 UTC to the Sunday on or after
                  // Apr 2 03:00 UTC (local midnight both times)
    kApia2011,    // -10 until 2011-12-30T10:00Z, then +14: the local Dec 30 2011 never happens
    kVostok1994,  // +7 until 1994-01-31T17:00Z, then 0: seven local hours repeat
    kLmt,         // a constant +00:19:32 (Amsterdam's mean time): local minutes are not UTC minutes
    kFixed,       // a constant offset (FakeZone::fixed)
    kFailing,     // cannot tell any offset
    kWild,        // +20 hours, beyond what tz data has
    kFlapping,    // changes every 10 minutes, as no zone does
};

struct FakeZone {
    FakeKind kind;
    std::int32_t fixed = 0;
    mutable long calls = 0;  // offset calls made, for the tests that look at the cost
};

inline bool fake_offset(const void* context, std::int64_t t, std::int32_t* offset) noexcept
{
    const FakeZone& zone = *static_cast<const FakeZone*>(context);
    ++zone.calls;
    const std::int64_t year = civil_from_seconds(t).date.year;
    switch (zone.kind) {
        case FakeKind::kBerlin: {
            const std::int64_t start = last_sunday(year, 3) * kSecondsPerDay + 3600;
            const std::int64_t end = last_sunday(year, 10) * kSecondsPerDay + 3600;
            *offset = t >= start && t < end ? 7200 : 3600;
            return true;
        }
        case FakeKind::kLordHowe: {
            const std::int64_t start = sunday_on_or_after(year, 10, 1) * kSecondsPerDay - 8 * 3600 - 1800;
            const std::int64_t end = sunday_on_or_after(year, 4, 1) * kSecondsPerDay - 9 * 3600;
            *offset = t >= end && t < start ? 37800 : 39600;
            return true;
        }
        case FakeKind::kSantiago: {
            const std::int64_t start = sunday_on_or_after(year, 9, 2) * kSecondsPerDay + 4 * 3600;
            const std::int64_t end = sunday_on_or_after(year, 4, 2) * kSecondsPerDay + 3 * 3600;
            *offset = t >= end && t < start ? -4 * 3600 : -3 * 3600;
            return true;
        }
        case FakeKind::kApia2011:
            *offset = t < utc(2011, 12, 30, 10) ? -10 * 3600 : 14 * 3600;
            return true;
        case FakeKind::kVostok1994:
            *offset = t < utc(1994, 1, 31, 17) ? 7 * 3600 : 0;
            return true;
        case FakeKind::kLmt:
            *offset = 19 * 60 + 32;
            return true;
        case FakeKind::kFixed:
            *offset = zone.fixed;
            return true;
        case FakeKind::kFailing:
            return false;
        case FakeKind::kWild:
            *offset = 20 * 3600;
            return true;
        case FakeKind::kFlapping:
            *offset = floor_mod(t, 1200) < 600 ? 0 : 3600;
            return true;
    }
    return false;
}

inline Zone zone_of(const FakeZone& fake)
{
    Zone zone;
    zone.offset_at = fake_offset;
    zone.context = &fake;
    return zone;
}

inline std::int32_t offset_of(const FakeZone& fake, std::int64_t t)
{
    std::int32_t offset = 0;
    fake_offset(&fake, t, &offset);
    return offset;
}

}  // namespace jobbuf::cron::test
