// Civil time without a zone (src/cron/cron_calendar.h): days from and to civil dates over the
// whole proleptic Gregorian range used, weekdays, leap years, the field-skipping search for the
// next matching civil minute, and the UTC text of a tick (src/cron/cron_utc_text.h).
#include <gtest/gtest.h>

#include <string>

#include "cron/cron_calendar.h"
#include "cron/cron_parse.h"
#include "cron/cron_utc_text.h"

using namespace jobbuf::cron;

namespace {

Spec spec_of(const char* text)
{
    const ParseResult r = parse(text);
    EXPECT_TRUE(r.ok) << text << ": " << r.error;
    return r.spec;
}

constexpr std::int64_t civil(std::int64_t y, int mo, int d, int h = 0, int mi = 0, int s = 0)
{
    return seconds_from_civil(y, mo, d, h, mi, s);
}

// The next matching minute from `from`, or -1 when there is none within `days` days.
std::int64_t next_minute(const char* text, std::int64_t from, std::int64_t days = 28 * 366)
{
    std::int64_t out = 0;
    return next_matching_minute(spec_of(text), from, from + days * kSecondsPerDay, &out) ? out : -1;
}

// Minute by minute, for checking the field-skipping search.
std::int64_t slow_next_minute(const Spec& spec, std::int64_t from, std::int64_t until)
{
    for (std::int64_t t = floor_div(from + 59, 60) * 60; t <= until; t += 60) {
        if (minute_matches(spec, t))
            return t;
    }
    return -1;
}

}  // namespace

TEST(CronCalendar, FloorDivisionRoundsDown)
{
    EXPECT_EQ(floor_div(7, 2), 3);
    EXPECT_EQ(floor_div(-7, 2), -4);
    EXPECT_EQ(floor_div(-8, 2), -4);
    EXPECT_EQ(floor_div(-1, 86400), -1);
    EXPECT_EQ(floor_mod(-1, 86400), 86399);
    EXPECT_EQ(floor_mod(-86400, 86400), 0);
    EXPECT_EQ(floor_mod(13, 7), 6);
}

TEST(CronCalendar, KnownDays)
{
    EXPECT_EQ(days_from_civil(1970, 1, 1), 0);
    EXPECT_EQ(days_from_civil(1969, 12, 31), -1);
    EXPECT_EQ(days_from_civil(2000, 3, 1), 11017);
    EXPECT_EQ(days_from_civil(2026, 3, 29), 20541);
    EXPECT_EQ(days_from_civil(1, 1, 1), -719162);
    EXPECT_EQ(days_from_civil(9999, 12, 31), 2932896);
    EXPECT_EQ(civil(2026, 3, 29, 1), 1774746000);  // SPEC's example tick
    EXPECT_EQ(civil(2038, 1, 19, 3, 14, 8), std::int64_t{1} << 31);
    EXPECT_EQ(civil(1901, 12, 13, 20, 45, 52), -(std::int64_t{1} << 31));
}

TEST(CronCalendar, DaysRoundTripOverTheWholeRange)
{
    std::int64_t expected = days_from_civil(0, 1, 1);
    CivilDate previous = civil_from_days(expected - 1);
    EXPECT_EQ(previous.year, -1);
    EXPECT_EQ(previous.month, 12);
    EXPECT_EQ(previous.day, 31);
    for (std::int64_t y = 0; y <= 10000; ++y) {
        for (int m = 1; m <= 12; ++m) {
            for (int d = 1; d <= days_in_month(y, m); ++d) {
                ASSERT_EQ(days_from_civil(y, m, d), expected) << y << "-" << m << "-" << d;
                const CivilDate back = civil_from_days(expected);
                ASSERT_EQ(back.year, y);
                ASSERT_EQ(back.month, m);
                ASSERT_EQ(back.day, d);
                ++expected;
            }
        }
    }
}

TEST(CronCalendar, LeapYearsAndMonthLengths)
{
    EXPECT_TRUE(is_leap_year(2000));
    EXPECT_TRUE(is_leap_year(2024));
    EXPECT_TRUE(is_leap_year(0));
    EXPECT_TRUE(is_leap_year(-4));
    EXPECT_FALSE(is_leap_year(1900));
    EXPECT_FALSE(is_leap_year(2100));
    EXPECT_FALSE(is_leap_year(2026));
    EXPECT_EQ(days_in_month(2024, 2), 29);
    EXPECT_EQ(days_in_month(2100, 2), 28);
    EXPECT_EQ(days_in_month(2026, 4), 30);
    EXPECT_EQ(days_in_month(2026, 12), 31);
    EXPECT_EQ(days_from_civil(2001, 1, 1) - days_from_civil(2000, 1, 1), 366);
    EXPECT_EQ(days_from_civil(2101, 1, 1) - days_from_civil(2100, 1, 1), 365);
}

TEST(CronCalendar, Weekdays)
{
    EXPECT_EQ(weekday_from_days(0), 4);                             // 1970-01-01, a Thursday
    EXPECT_EQ(weekday_from_days(-1), 3);                            // a Wednesday
    EXPECT_EQ(weekday_from_days(days_from_civil(2026, 3, 29)), 0);  // a Sunday
    EXPECT_EQ(weekday_from_days(days_from_civil(2000, 2, 29)), 2);  // a Tuesday
    EXPECT_EQ(weekday_from_days(days_from_civil(1900, 1, 1)), 1);   // a Monday
    EXPECT_EQ(weekday_from_days(days_from_civil(1, 1, 1)), 1);      // a Monday
    EXPECT_EQ(weekday_from_days(days_from_civil(2026, 2, 13)), 5);  // a Friday
    for (std::int64_t d = -1000; d < 1000; ++d)
        EXPECT_EQ(weekday_from_days(d + 1), (weekday_from_days(d) + 1) % 7);
}

TEST(CronCalendar, CivilSecondsSplitIntoFields)
{
    const CivilTime t = civil_from_seconds(civil(2026, 10, 25, 2, 30, 59));
    EXPECT_EQ(t.date.year, 2026);
    EXPECT_EQ(t.date.month, 10);
    EXPECT_EQ(t.date.day, 25);
    EXPECT_EQ(t.hour, 2);
    EXPECT_EQ(t.minute, 30);
    EXPECT_EQ(t.second, 59);
    const CivilTime before = civil_from_seconds(-1);
    EXPECT_EQ(before.date.year, 1969);
    EXPECT_EQ(before.hour, 23);
    EXPECT_EQ(before.minute, 59);
    EXPECT_EQ(before.second, 59);
}

TEST(CronCalendar, NextMatchingMinuteRoundsUpToAWholeMinute)
{
    const std::int64_t t = civil(2026, 5, 1, 10, 15);
    EXPECT_EQ(next_minute("* * * * *", t), t);
    EXPECT_EQ(next_minute("* * * * *", t + 1), t + 60);
    EXPECT_EQ(next_minute("* * * * *", t - 1), t);
    EXPECT_EQ(next_minute("* * * * *", -1), 0);
    EXPECT_EQ(next_minute("* * * * *", -61), -60);
}

TEST(CronCalendar, NextMatchingMinuteSkipsByFields)
{
    const std::int64_t from = civil(2026, 5, 1, 10, 15);
    EXPECT_EQ(next_minute("30 * * * *", from), civil(2026, 5, 1, 10, 30));
    EXPECT_EQ(next_minute("10 * * * *", from), civil(2026, 5, 1, 11, 10));
    EXPECT_EQ(next_minute("0 9 * * *", from), civil(2026, 5, 2, 9, 0));
    EXPECT_EQ(next_minute("59 23 * * *", from), civil(2026, 5, 1, 23, 59));
    EXPECT_EQ(next_minute("0 0 1 * *", from), civil(2026, 6, 1));
    EXPECT_EQ(next_minute("0 0 31 * *", from), civil(2026, 5, 31));
    EXPECT_EQ(next_minute("0 0 31 * *", civil(2026, 6, 1)), civil(2026, 7, 31));
    EXPECT_EQ(next_minute("0 0 1 1 *", from), civil(2027, 1, 1));
    EXPECT_EQ(next_minute("0 0 * * 1", from), civil(2026, 5, 4));  // 2026-05-01 is a Friday
    EXPECT_EQ(next_minute("0 0 * 2 *", from), civil(2027, 2, 1));
    EXPECT_EQ(next_minute("0 12 29 2 *", civil(2097, 1, 1)), civil(2104, 2, 29, 12));
    EXPECT_EQ(next_minute("0 0 30 2 *", from), -1);
    EXPECT_EQ(next_minute("0 0 31 4,6,9,11 *", from), -1);
    EXPECT_EQ(next_minute("0 0 1 1 *", from, 200), -1);  // beyond `until`
}

TEST(CronCalendar, NextMatchingMinuteAgreesWithAMinuteByMinuteScan)
{
    const char* texts[] = {"*/7 */5 * * *", "0 0 13 * 5",      "30 2 */3 * 1-5", "0,30 9-17 * 2,3 mon-fri",
                           "5 4 * * sun",   "59 23 31 12 *",   "0 0 1-7 * 1",    "15 */6 */2 * */2",
                           "0 3 29 2 *",    "1-5/2 1 1 */2 6", "0 0 28-31 * *",  "*/20 23 * * 0"};
    for (const char* text : texts) {
        const Spec spec = spec_of(text);
        for (std::int64_t from = civil(2023, 12, 25, 7, 3, 11); from < civil(2024, 4, 1); from += 86400 * 5 + 3607) {
            const std::int64_t until = from + 70 * kSecondsPerDay;
            std::int64_t fast = -1;
            if (!next_matching_minute(spec, from, until, &fast))
                fast = -1;
            ASSERT_EQ(fast, slow_next_minute(spec, from, until)) << text << " from " << format_utc(from);
        }
    }
}

TEST(CronCalendar, DayRuleIsVixies)
{
    // Both restricted: either day fires. 2026-01-02 is a Friday; Feb 13 is a Friday the 13th.
    const Spec either = spec_of("0 0 13 * fri");
    EXPECT_TRUE(day_matches(either, days_from_civil(2026, 1, 2)));
    EXPECT_TRUE(day_matches(either, days_from_civil(2026, 1, 13)));  // a Tuesday
    EXPECT_FALSE(day_matches(either, days_from_civil(2026, 1, 14)));
    // One is a star (even a stepped one): both must match.
    const Spec both = spec_of("0 0 */2 * fri");
    EXPECT_TRUE(day_matches(both, days_from_civil(2026, 1, 9)));    // odd day, Friday
    EXPECT_FALSE(day_matches(both, days_from_civil(2026, 1, 2)));   // even day, Friday
    EXPECT_FALSE(day_matches(both, days_from_civil(2026, 1, 13)));  // odd day, Tuesday
    const Spec weekday_only = spec_of("0 0 * * fri");
    EXPECT_TRUE(day_matches(weekday_only, days_from_civil(2026, 1, 2)));
    EXPECT_FALSE(day_matches(weekday_only, days_from_civil(2026, 1, 13)));
    const Spec day_only = spec_of("0 0 13 * *");
    EXPECT_TRUE(day_matches(day_only, days_from_civil(2026, 1, 13)));
    EXPECT_FALSE(day_matches(day_only, days_from_civil(2026, 1, 2)));
    // The month always has to match.
    EXPECT_FALSE(day_matches(spec_of("0 0 13 2 fri"), days_from_civil(2026, 1, 2)));
    EXPECT_EQ(next_minute("0 0 13 * 5", civil(2026, 1, 1)), civil(2026, 1, 2));
    EXPECT_EQ(next_minute("0 0 13 * 5", civil(2026, 1, 10)), civil(2026, 1, 13));
}

TEST(CronCalendar, SecondsSchedulesAndEmptySpecsMatchNoMinute)
{
    std::int64_t out = 0;
    EXPECT_FALSE(next_matching_minute(spec_of("5 seconds"), 0, 1000000, &out));
    EXPECT_FALSE(next_matching_minute(Spec{}, 0, 1000000, &out));
    EXPECT_FALSE(minute_matches(spec_of("5 seconds"), 0));
}

TEST(CronUtcText, TicksAreIso8601WithZ)
{
    EXPECT_EQ(format_utc(0), "1970-01-01T00:00:00Z");
    EXPECT_EQ(format_utc(1774746000), "2026-03-29T01:00:00Z");
    EXPECT_EQ(format_utc(civil(2024, 2, 29, 23, 59, 59)), "2024-02-29T23:59:59Z");
    EXPECT_EQ(format_utc(-1), "1969-12-31T23:59:59Z");
    EXPECT_EQ(format_utc(civil(1, 1, 1)), "0001-01-01T00:00:00Z");
    EXPECT_EQ(format_utc(civil(9999, 12, 31, 23, 59, 59)), "9999-12-31T23:59:59Z");
    EXPECT_EQ(format_utc(civil(10000, 1, 1)), "10000-01-01T00:00:00Z");
    EXPECT_EQ(format_utc(civil(-1, 1, 1)), "-0001-01-01T00:00:00Z");
    char text[kUtcTextSize];
    EXPECT_EQ(format_utc(1774746000, text), 20u);
    EXPECT_STREQ(text, "2026-03-29T01:00:00Z");
    EXPECT_GT(format_utc(INT64_MIN, text), 20u);
    EXPECT_GT(format_utc(INT64_MAX, text), 20u);
}
