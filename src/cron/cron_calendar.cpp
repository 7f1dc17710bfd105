// Pure C++ regime: matching a schedule's five fields against civil time, and the search for the
// next civil minute they match (skipping by month, day, hour and minute).
#include "cron/regime.h"

#include "cron/cron_calendar.h"

namespace jobbuf::cron {

namespace {

// The lowest set bit at or above `from` (0-63) of mask, or -1.
int next_bit(std::uint64_t mask, int from) noexcept
{
    if (from > 63)
        return -1;
    const std::uint64_t rest = mask & (~std::uint64_t{0} << from);
    return rest == 0 ? -1 : __builtin_ctzll(rest);
}

// Vixie's day rule on one day of a month the schedule names.
bool day_rule_matches(const Spec& spec, const CivilDate& date, int weekday) noexcept
{
    const bool by_day = (spec.days >> date.day) & 1u;
    const bool by_weekday = (spec.weekdays >> weekday) & 1u;
    if (spec.day_restricted && spec.weekday_restricted)
        return by_day || by_weekday;
    return by_day && by_weekday;
}

}  // namespace

bool day_matches(const Spec& spec, std::int64_t days) noexcept
{
    const CivilDate date = civil_from_days(days);
    return ((spec.months >> date.month) & 1u) && day_rule_matches(spec, date, weekday_from_days(days));
}

bool minute_matches(const Spec& spec, std::int64_t civil_seconds) noexcept
{
    if (spec.every_seconds != 0 || floor_mod(civil_seconds, 60) != 0)
        return false;
    const CivilTime t = civil_from_seconds(civil_seconds);
    return ((spec.minutes >> t.minute) & 1u) && ((spec.hours >> t.hour) & 1u) &&
           day_matches(spec, floor_div(civil_seconds, kSecondsPerDay));
}

bool next_matching_minute(const Spec& spec, std::int64_t from, std::int64_t until, std::int64_t* out) noexcept
{
    // Only the bits a field can hold take part (a Spec made by hand may set others).
    Spec fields = spec;
    fields.minutes &= (std::uint64_t{1} << 60) - 1;
    fields.hours &= (std::uint32_t{1} << 24) - 1;
    fields.months &= 0x1ffe;  // 1-12
    if (spec.every_seconds != 0 || fields.minutes == 0 || fields.hours == 0 || fields.months == 0)
        return false;
    // Start at the first whole minute at or after `from` (both ends kept within kCivilLimit).
    if (from < -kCivilLimit)
        from = -kCivilLimit;
    if (until > kCivilLimit)
        until = kCivilLimit;
    const std::int64_t start = floor_div(from, 60) * 60 + (floor_mod(from, 60) != 0 ? 60 : 0);
    std::int64_t days = floor_div(start, kSecondsPerDay);
    const std::int64_t last_day = floor_div(until, kSecondsPerDay);
    const int start_of_day = static_cast<int>(floor_mod(start, kSecondsPerDay));
    int hour = start_of_day / 3600;
    int minute = start_of_day / 60 % 60;
    CivilDate date = civil_from_days(days);

    // Each pass moves forward by at least a minute within a day or to a later day, and a day is
    // passed at most once per hour of it, so the loop ends once `days` passes last_day.
    while (days <= last_day) {
        if (!((fields.months >> date.month) & 1u)) {
            // To the first day of the next month the schedule names (this year or the next).
            const int month = next_bit(fields.months, date.month + 1);
            date = month > 0 ? CivilDate{date.year, month, 1} : CivilDate{date.year + 1, next_bit(fields.months, 1), 1};
            days = days_from_civil(date.year, date.month, 1);
            hour = minute = 0;
            continue;
        }
        // The first day of this month from date.day on that passes the day rule.
        const int month_days = days_in_month(date.year, date.month);
        int weekday = weekday_from_days(days);
        int day = date.day;
        while (day <= month_days && !day_rule_matches(spec, CivilDate{date.year, date.month, day}, weekday)) {
            ++day;
            weekday = weekday == 6 ? 0 : weekday + 1;
        }
        if (day > month_days) {
            date = date.month == 12 ? CivilDate{date.year + 1, 1, 1} : CivilDate{date.year, date.month + 1, 1};
            days = days_from_civil(date.year, date.month, 1);
            hour = minute = 0;
            continue;
        }
        if (day != date.day) {
            days += day - date.day;
            date.day = day;
            hour = minute = 0;
        }
        const int next_hour = next_bit(fields.hours, hour);
        if (next_hour < 0 || next_hour > kHourMax) {
            days += 1;
            date = civil_from_days(days);
            hour = minute = 0;
            continue;
        }
        if (next_hour != hour) {
            hour = next_hour;
            minute = 0;
        }
        const int next_minute = next_bit(fields.minutes, minute);
        if (next_minute < 0 || next_minute > kMinuteMax) {
            hour += 1;
            minute = 0;
            if (hour > kHourMax) {
                days += 1;
                date = civil_from_days(days);
                hour = 0;
            }
            continue;
        }
        const std::int64_t found = days * kSecondsPerDay + hour * 3600 + next_minute * 60;
        if (found > until)
            return false;
        *out = found;
        return true;
    }
    return false;
}

}  // namespace jobbuf::cron
