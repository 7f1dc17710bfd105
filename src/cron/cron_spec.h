// Pure C++ regime: the parsed form of a schedule's cron text (cron_parse.h makes it, the calendar
// and next_tick read it). Plain data, trivially copyable: the Postgres side may keep it anywhere.
#pragma once
#include <cstdint>
#include <type_traits>

namespace jobbuf::cron {

// The five fields' bounds as Vixie cron reads them. A weekday of 7 is Sunday, stored as 0.
constexpr int kMinuteMin = 0, kMinuteMax = 59;
constexpr int kHourMin = 0, kHourMax = 23;
constexpr int kDayMin = 1, kDayMax = 31;
constexpr int kMonthMin = 1, kMonthMax = 12;
constexpr int kWeekdayMin = 0, kWeekdayMax = 7;

// "N seconds" takes N from 1 to 59.
constexpr int kEverySecondsMin = 1, kEverySecondsMax = 59;

struct Spec {
    // Calendar fields: bit v set when value v fires (bit 0 of days and months is never set;
    // weekdays are 0 Sunday .. 6 Saturday, a 7 in the text sets bit 0).
    std::uint64_t minutes = 0;
    std::uint32_t hours = 0;
    std::uint32_t days = 0;
    std::uint16_t months = 0;
    std::uint8_t weekdays = 0;

    // Vixie's day rule: a field is restricted when its text does not start with '*' ("*/2" is
    // not restricted, "1-31" is). When both day-of-month and weekday are restricted a day
    // matching either fires; otherwise a day must match both (a '*' field matches every day).
    bool day_restricted = false;
    bool weekday_restricted = false;

    // DST rule (SPEC "DST, as cron does it"). True when neither the minute nor the hour field
    // holds a '*' or a step ('/'): values, lists and ranges only ("30 2", "0,30 1-3"). Such a
    // schedule fires a local time skipped by a forward change once, at the change, and a repeated
    // local time once, at its first occurrence. False: it follows the wall clock (every matching
    // local time that exists, both passes of a repeated hour). Vixie decides on the first
    // character only ('*' or not); SPEC also names a step, so "5-59/20" follows the wall clock
    // here where Vixie would treat it as fixed. A range without a step counts as fixed, as in
    // Vixie. @hourly is "0 * * * *" (wall clock), the other macros are fixed.
    bool fixed_time = false;

    // N of "N seconds" (ticks at every Unix time that is a multiple of N, whatever the zone);
    // 0 for calendar schedules, whose fields above are then the schedule.
    int every_seconds = 0;
};

static_assert(std::is_trivially_copyable_v<Spec>, "Spec crosses the boundary by copy");

}  // namespace jobbuf::cron
