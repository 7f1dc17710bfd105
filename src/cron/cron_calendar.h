// Pure C++ regime: civil (calendar) time without a time zone, for periodic jobs: the proleptic
// Gregorian calendar on a count of days since 1970-01-01, weekdays, and the next civil minute a
// schedule's fields match. Times here are "civil seconds": seconds since 1970-01-01T00:00 of a
// wall clock (UTC's civil seconds are Unix seconds; a zone's are Unix seconds + its offset).
#pragma once
#include <cstdint>

#include "cron/cron_spec.h"

namespace jobbuf::cron {

constexpr std::int64_t kSecondsPerDay = 86400;

// Division and remainder rounding toward negative infinity (b > 0), without overflow for any a.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept
{
    return a / b - (a % b < 0 ? 1 : 0);
}
constexpr std::int64_t floor_mod(std::int64_t a, std::int64_t b) noexcept
{
    return a % b < 0 ? a % b + b : a % b;
}

constexpr bool is_leap_year(std::int64_t year) noexcept
{
    return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
}

// month 1-12.
constexpr int days_in_month(std::int64_t year, int month) noexcept
{
    constexpr int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return month == 2 && is_leap_year(year) ? 29 : kDays[month - 1];
}

struct CivilDate {
    std::int64_t year;  // proleptic Gregorian, astronomical numbering (year 0 = 1 BC)
    int month;          // 1-12
    int day;            // 1-31
};

// Days since 1970-01-01 of a valid civil date (counting from March, so that February's length is
// the last thing in a year's count).
constexpr std::int64_t days_from_civil(std::int64_t year, int month, int day) noexcept
{
    const std::int64_t y = month <= 2 ? year - 1 : year;
    const std::int64_t cycle = floor_div(y, 400);        // 400-year cycles of 146097 days
    const std::int64_t year_of_cycle = y - cycle * 400;  // 0-399
    const int month_from_march = month > 2 ? month - 3 : month + 9;
    const std::int64_t day_of_year = (153 * month_from_march + 2) / 5 + day - 1;  // 0-365
    const std::int64_t day_of_cycle = year_of_cycle * 365 + year_of_cycle / 4 - year_of_cycle / 100 + day_of_year;
    return cycle * 146097 + day_of_cycle - 719468;  // 719468: days from 0000-03-01 to 1970-01-01
}

constexpr CivilDate civil_from_days(std::int64_t days) noexcept
{
    const std::int64_t shifted = days + 719468;
    const std::int64_t cycle = floor_div(shifted, 146097);
    const std::int64_t day_of_cycle = shifted - cycle * 146097;  // 0-146096
    const std::int64_t year_of_cycle =
        (day_of_cycle - day_of_cycle / 1460 + day_of_cycle / 36524 - day_of_cycle / 146096) / 365;
    const std::int64_t day_of_year = day_of_cycle - (365 * year_of_cycle + year_of_cycle / 4 - year_of_cycle / 100);
    const int month_from_march = static_cast<int>((5 * day_of_year + 2) / 153);
    const int day = static_cast<int>(day_of_year - (153 * month_from_march + 2) / 5 + 1);
    const int month = month_from_march < 10 ? month_from_march + 3 : month_from_march - 9;
    const std::int64_t year = year_of_cycle + cycle * 400 + (month <= 2 ? 1 : 0);
    return CivilDate{year, month, day};
}

// 0 Sunday .. 6 Saturday (1970-01-01 was a Thursday).
constexpr int weekday_from_days(std::int64_t days) noexcept
{
    return static_cast<int>(floor_mod(days + 4, 7));
}

struct CivilTime {
    CivilDate date;
    int hour;    // 0-23
    int minute;  // 0-59
    int second;  // 0-59
};

constexpr CivilTime civil_from_seconds(std::int64_t seconds) noexcept
{
    const std::int64_t days = floor_div(seconds, kSecondsPerDay);
    const int of_day = static_cast<int>(floor_mod(seconds, kSecondsPerDay));
    return CivilTime{civil_from_days(days), of_day / 3600, of_day / 60 % 60, of_day % 60};
}

constexpr std::int64_t seconds_from_civil(std::int64_t year, int month, int day, int hour = 0, int minute = 0,
                                          int second = 0) noexcept
{
    return days_from_civil(year, month, day) * kSecondsPerDay + hour * 3600 + minute * 60 + second;
}

// Whether a civil day (days since 1970-01-01) passes the schedule's month and day rules.
bool day_matches(const Spec& spec, std::int64_t days) noexcept;

// Whether a civil second is a whole minute the calendar schedule fires at.
bool minute_matches(const Spec& spec, std::int64_t civil_seconds) noexcept;

// How far from 1970 next_matching_minute looks, in civil seconds (about 35 million years).
constexpr std::int64_t kCivilLimit = std::int64_t{1} << 50;

// The first whole civil minute at or after `from` (civil seconds) that a calendar schedule's
// five fields match, if there is one at or before `until`: true and *out set, else false. It
// skips by fields (month, then day, then hour, then minute), so the cost is a few steps per
// month between `from` and the match (or `until`), never one per minute: callers bound `until`
// (next_tick searches 28 years). A schedule with every_seconds set matches nothing here.
bool next_matching_minute(const Spec& spec, std::int64_t from, std::int64_t until, std::int64_t* out) noexcept;

}  // namespace jobbuf::cron
