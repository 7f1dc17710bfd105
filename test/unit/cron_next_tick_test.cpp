// The next tick of a schedule (src/cron/cron_next_tick.h) in UTC and in fixed-offset zones:
// strictly after, across month, year and leap-year ends, schedules that never fire, "N
// seconds", the supported range, zones that misbehave, and 10,000 yearly and Feb 29 schedules
// computed right (the DST rules are in cron_dst_test.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cron/cron_next_tick.h"
#include "cron/cron_parse.h"
#include "cron/cron_utc_text.h"
#include "cron_fake_zones.h"

using namespace jobbuf::cron;
using jobbuf::cron::test::FakeKind;
using jobbuf::cron::test::FakeZone;
using jobbuf::cron::test::utc;
using jobbuf::cron::test::zone_of;

namespace {

Spec spec_of(const std::string& text)
{
    const ParseResult r = parse(text);
    EXPECT_TRUE(r.ok) << text << ": " << r.error;
    return r.spec;
}

// The next tick in UTC as text, "none", "zone error" or "out of range".
std::string next_text(const std::string& cron, std::int64_t after, const Zone& zone = Zone{})
{
    const NextResult r = next_tick(spec_of(cron), after, zone);
    switch (r.status) {
        case NextStatus::kFound:
            EXPECT_GT(r.tick, after);
            return format_utc(r.tick);
        case NextStatus::kNone:
            return "none";
        case NextStatus::kZoneError:
            return "zone error";
        case NextStatus::kOutOfRange:
            return "out of range";
    }
    return "?";
}

// The ticks after `after`, `count` of them, as text.
std::vector<std::string> ticks(const std::string& cron, std::int64_t after, int count, const Zone& zone = Zone{})
{
    std::vector<std::string> out;
    const Spec spec = spec_of(cron);
    for (int i = 0; i < count; ++i) {
        const NextResult r = next_tick(spec, after, zone);
        if (r.status != NextStatus::kFound)
            break;
        out.push_back(format_utc(r.tick));
        after = r.tick;
    }
    return out;
}

using Texts = std::vector<std::string>;

}  // namespace

TEST(CronNextTick, StrictlyAfterAndOnWholeMinutes)
{
    const std::int64_t t = utc(2026, 5, 1, 10, 15);
    EXPECT_EQ(next_text("* * * * *", t), "2026-05-01T10:16:00Z");
    EXPECT_EQ(next_text("* * * * *", t - 1), "2026-05-01T10:15:00Z");
    EXPECT_EQ(next_text("* * * * *", t + 59), "2026-05-01T10:16:00Z");
    EXPECT_EQ(next_text("15 10 * * *", t), "2026-05-02T10:15:00Z");
    EXPECT_EQ(next_text("15 10 * * *", t - 1), "2026-05-01T10:15:00Z");
}

TEST(CronNextTick, StepsListsAndRanges)
{
    EXPECT_EQ(ticks("*/15 * * * *", utc(2026, 5, 1, 10, 50), 4),
              (Texts{"2026-05-01T11:00:00Z", "2026-05-01T11:15:00Z", "2026-05-01T11:30:00Z", "2026-05-01T11:45:00Z"}));
    EXPECT_EQ(ticks("5-59/20 * * * *", utc(2026, 5, 1, 10, 50), 4),
              (Texts{"2026-05-01T11:05:00Z", "2026-05-01T11:25:00Z", "2026-05-01T11:45:00Z", "2026-05-01T12:05:00Z"}));
    EXPECT_EQ(ticks("50/5 * * * *", utc(2026, 5, 1, 10, 50), 3),
              (Texts{"2026-05-01T10:55:00Z", "2026-05-01T11:50:00Z", "2026-05-01T11:55:00Z"}));
    EXPECT_EQ(ticks("0 9-17/4 * * mon-fri", utc(2026, 5, 1, 12), 4),  // a Friday
              (Texts{"2026-05-01T13:00:00Z", "2026-05-01T17:00:00Z", "2026-05-04T09:00:00Z", "2026-05-04T13:00:00Z"}));
    EXPECT_EQ(ticks("0 0 * * 7", utc(2026, 5, 1), 2), (Texts{"2026-05-03T00:00:00Z", "2026-05-10T00:00:00Z"}));
    EXPECT_EQ(ticks("0 0 * * 0", utc(2026, 5, 1), 2), (Texts{"2026-05-03T00:00:00Z", "2026-05-10T00:00:00Z"}));
}

TEST(CronNextTick, MonthAndYearEnds)
{
    EXPECT_EQ(next_text("0 0 1 * *", utc(2026, 12, 31, 23, 59, 59)), "2027-01-01T00:00:00Z");
    EXPECT_EQ(next_text("0 0 1 * *", utc(2027, 1, 1)), "2027-02-01T00:00:00Z");
    EXPECT_EQ(next_text("59 23 31 12 *", utc(2026, 12, 31, 23, 59)), "2027-12-31T23:59:00Z");
    EXPECT_EQ(ticks("0 0 31 * *", utc(2026, 1, 31), 3),
              (Texts{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z"}));
    EXPECT_EQ(ticks("0 12 28-31 2 *", utc(2023, 3, 1), 3),
              (Texts{"2024-02-28T12:00:00Z", "2024-02-29T12:00:00Z", "2025-02-28T12:00:00Z"}));
    EXPECT_EQ(ticks("@yearly", utc(2026, 6, 1), 2), (Texts{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}));
    EXPECT_EQ(ticks("@monthly", utc(2026, 11, 15), 2), (Texts{"2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"}));
    EXPECT_EQ(ticks("@weekly", utc(2026, 12, 30), 2), (Texts{"2027-01-03T00:00:00Z", "2027-01-10T00:00:00Z"}));
    EXPECT_EQ(ticks("@daily", utc(2026, 12, 31, 5), 2), (Texts{"2027-01-01T00:00:00Z", "2027-01-02T00:00:00Z"}));
    EXPECT_EQ(ticks("@hourly", utc(2026, 12, 31, 23, 30), 2), (Texts{"2027-01-01T00:00:00Z", "2027-01-01T01:00:00Z"}));
}

TEST(CronNextTick, LeapDays)
{
    EXPECT_EQ(ticks("0 0 29 2 *", utc(2023, 1, 1), 3),
              (Texts{"2024-02-29T00:00:00Z", "2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}));
    EXPECT_EQ(next_text("0 0 29 2 *", utc(2096, 3, 1)), "2104-02-29T00:00:00Z");      // 2100 is not a leap year
    EXPECT_EQ(next_text("0 0 29 2 *", utc(2396, 3, 1)), "2400-02-29T00:00:00Z");      // 2400 is
    EXPECT_EQ(next_text("0 0 29 feb mon", utc(2024, 2, 1)), "2024-02-05T00:00:00Z");  // either day
}

TEST(CronNextTick, EitherDayWhenBothAreRestricted)
{
    // 2026-01-02 is a Friday, Feb 13 2026 a Friday the 13th.
    EXPECT_EQ(ticks("0 0 13 * 5", utc(2026, 1, 1), 4),
              (Texts{"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z", "2026-01-16T00:00:00Z"}));
    EXPECT_EQ(ticks("0 0 1,15 * mon", utc(2026, 6, 1), 4),  // 2026-06-01 is a Monday
              (Texts{"2026-06-08T00:00:00Z", "2026-06-15T00:00:00Z", "2026-06-22T00:00:00Z", "2026-06-29T00:00:00Z"}));
    // One star (a stepped one too): both must match.
    EXPECT_EQ(ticks("0 0 * * 5", utc(2026, 1, 1), 2), (Texts{"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z"}));
    EXPECT_EQ(ticks("0 0 13 * *", utc(2026, 1, 1), 2), (Texts{"2026-01-13T00:00:00Z", "2026-02-13T00:00:00Z"}));
    EXPECT_EQ(ticks("0 0 */2 * 5", utc(2026, 1, 1), 3),  // odd days that are Fridays
              (Texts{"2026-01-09T00:00:00Z", "2026-01-23T00:00:00Z", "2026-02-13T00:00:00Z"}));
}

TEST(CronNextTick, SchedulesThatNeverFire)
{
    const char* never[] = {"0 0 30 2 *", "0 0 31 2 *", "0 0 31 4 *", "0 0 31 4,6,9,11 *", "* * 30,31 feb *"};
    for (const char* cron : never) {
        const NextResult r = next_tick(spec_of(cron), utc(2026, 1, 1), Zone{});
        EXPECT_EQ(r.status, NextStatus::kNone) << cron;
        EXPECT_NE(std::string(r.message).find("no tick within 28 years"), std::string::npos) << r.message;
    }
    // ... while a day field saved by the either rule does fire.
    EXPECT_EQ(next_text("0 0 30 2 sun", utc(2026, 1, 1)), "2026-02-01T00:00:00Z");
    const NextResult empty = next_tick(Spec{}, 0, Zone{});
    EXPECT_EQ(empty.status, NextStatus::kNone);
}

TEST(CronNextTick, EverySecondsFollowsUnixTime)
{
    EXPECT_EQ(next_tick(spec_of("7 seconds"), 100, Zone{}).tick, 105);
    EXPECT_EQ(next_tick(spec_of("7 seconds"), 105, Zone{}).tick, 112);
    EXPECT_EQ(next_tick(spec_of("7 seconds"), 104, Zone{}).tick, 105);
    EXPECT_EQ(next_tick(spec_of("1 second"), 41, Zone{}).tick, 42);
    EXPECT_EQ(next_tick(spec_of("30 seconds"), -31, Zone{}).tick, -30);
    EXPECT_EQ(next_tick(spec_of("30 seconds"), -30, Zone{}).tick, 0);
    EXPECT_EQ(next_tick(spec_of("59 seconds"), utc(2026, 3, 29, 0, 59, 59), Zone{}).tick % 59, 0);
    // Whatever the zone: even one that cannot tell its offset.
    FakeZone berlin{FakeKind::kBerlin};
    FakeZone failing{FakeKind::kFailing};
    EXPECT_EQ(next_tick(spec_of("10 seconds"), utc(2026, 3, 29, 0, 59, 55), zone_of(berlin)).tick, utc(2026, 3, 29, 1));
    EXPECT_EQ(next_tick(spec_of("10 seconds"), 5, zone_of(failing)).tick, 10);
    EXPECT_EQ(berlin.calls, 0);
    Spec bad;
    bad.every_seconds = 60;
    EXPECT_EQ(next_tick(bad, 0, Zone{}).status, NextStatus::kNone);
}

TEST(CronNextTick, TheSupportedRange)
{
    EXPECT_EQ(next_text("* * * * *", kMinUnixSeconds - 1), "out of range");
    EXPECT_EQ(next_text("* * * * *", kMaxUnixSeconds + 1), "out of range");
    EXPECT_EQ(next_text("* * * * *", kMinUnixSeconds), "0001-01-01T00:01:00Z");
    EXPECT_EQ(next_text("0 0 1 1 *", utc(9998, 6, 1)), "9999-01-01T00:00:00Z");
    EXPECT_EQ(next_text("0 0 1 1 *", utc(9999, 6, 1)), "none");
    EXPECT_EQ(next_text("59 23 31 12 *", utc(9999, 12, 31, 23, 58)), "9999-12-31T23:59:00Z");
    EXPECT_EQ(next_text("* * * * *", kMaxUnixSeconds), "none");
    EXPECT_EQ(next_text("1 seconds", kMaxUnixSeconds), "none");
    EXPECT_EQ(next_text("1 seconds", kMaxUnixSeconds - 1), "9999-12-31T23:59:59Z");
    const NextResult r = next_tick(spec_of("@daily"), kMaxUnixSeconds + 1, Zone{});
    EXPECT_EQ(r.status, NextStatus::kOutOfRange);
    EXPECT_STRNE(r.message, "");
}

TEST(CronNextTick, FixedOffsetZones)
{
    FakeZone tokyo{FakeKind::kFixed, 9 * 3600};
    FakeZone honolulu{FakeKind::kFixed, -10 * 3600};
    FakeZone kiritimati{FakeKind::kFixed, 14 * 3600};
    FakeZone kathmandu{FakeKind::kFixed, 5 * 3600 + 45 * 60};
    EXPECT_EQ(next_text("0 9 * * *", utc(2026, 1, 1), zone_of(tokyo)), "2026-01-02T00:00:00Z");
    EXPECT_EQ(next_text("0 0 1 1 *", utc(2026, 6, 1), zone_of(honolulu)), "2027-01-01T10:00:00Z");
    EXPECT_EQ(next_text("0 0 1 1 *", utc(2026, 6, 1), zone_of(kiritimati)), "2026-12-31T10:00:00Z");
    EXPECT_EQ(next_text("0 0 * * *", utc(2026, 1, 1), zone_of(kathmandu)), "2026-01-01T18:15:00Z");
    EXPECT_EQ(next_text("0 0 * * mon", utc(2026, 1, 1), zone_of(kiritimati)), "2026-01-04T10:00:00Z");
    EXPECT_EQ(next_text("0 0 29 2 *", utc(2026, 1, 1), zone_of(honolulu)), "2028-02-29T10:00:00Z");
}

TEST(CronNextTick, OffsetsWithSecondsShiftTheTicksOffTheUtcMinute)
{
    FakeZone lmt{FakeKind::kLmt};  // +00:19:32
    EXPECT_EQ(next_text("0 12 * * *", utc(1930, 5, 1), zone_of(lmt)), "1930-05-01T11:40:28Z");
    EXPECT_EQ(ticks("*/30 * * * *", utc(1930, 5, 1, 11, 40, 28), 2, zone_of(lmt)),
              (Texts{"1930-05-01T12:10:28Z", "1930-05-01T12:40:28Z"}));
}

TEST(CronNextTick, ZonesThatMisbehaveAreReported)
{
    FakeZone failing{FakeKind::kFailing};
    FakeZone wild{FakeKind::kWild};
    FakeZone flapping{FakeKind::kFlapping};
    NextResult r = next_tick(spec_of("* * * * *"), 0, zone_of(failing));
    EXPECT_EQ(r.status, NextStatus::kZoneError);
    EXPECT_NE(std::string(r.message).find("no UTC offset"), std::string::npos) << r.message;
    r = next_tick(spec_of("* * * * *"), 0, zone_of(wild));
    EXPECT_EQ(r.status, NextStatus::kZoneError);
    EXPECT_NE(std::string(r.message).find("16 hours"), std::string::npos) << r.message;
    // A zone whose offset changes every 10 minutes breaks what next_tick relies on: it gives
    // a tick or says so, but does not loop.
    const Spec every_minute = spec_of("* * * * *");
    for (std::int64_t t = 0; t < 7200; t += 97) {
        r = next_tick(every_minute, t, zone_of(flapping));
        EXPECT_TRUE(r.status == NextStatus::kFound || r.status == NextStatus::kZoneError);
        if (r.status == NextStatus::kFound) {
            EXPECT_GT(r.tick, t);
        }
    }
}

TEST(CronNextTick, ManyYearlyAndLeapDaySchedulesAreRightAndCheap)
{
    // 10,000 schedules' next ticks: yearly ones at every minute of the year's first day and Feb
    // 29 ones, in a zone with DST, from instants spread over 30 years.
    FakeZone berlin{FakeKind::kBerlin};
    const Zone zone = zone_of(berlin);
    for (int i = 0; i < 5000; ++i) {
        const int hour = i % 24;
        const int minute = (i * 7) % 60;
        const std::int64_t after = utc(2000, 1, 1) + std::int64_t{i} * 189347;  // about 30 years in steps
        const std::int64_t after_year = civil_from_seconds(after + 3600).date.year;

        const Spec yearly = spec_of(std::to_string(minute) + " " + std::to_string(hour) + " 1 1 *");
        NextResult r = next_tick(yearly, after, zone);
        ASSERT_EQ(r.status, NextStatus::kFound);
        CivilTime local = civil_from_seconds(r.tick + 3600);  // CET on Jan 1
        ASSERT_EQ(local.date.month, 1);
        ASSERT_EQ(local.date.day, 1);
        ASSERT_EQ(local.hour, hour);
        ASSERT_EQ(local.minute, minute);
        ASSERT_TRUE(local.date.year == after_year || local.date.year == after_year + 1);
        ASSERT_GT(r.tick, after);
        ASSERT_LE(r.tick - after, 366 * kSecondsPerDay);

        const Spec leap = spec_of(std::to_string(minute) + " " + std::to_string(hour) + " 29 2 *");
        r = next_tick(leap, after, zone);
        ASSERT_EQ(r.status, NextStatus::kFound);
        local = civil_from_seconds(r.tick + 3600);
        ASSERT_EQ(local.date.month, 2);
        ASSERT_EQ(local.date.day, 29);
        ASSERT_EQ(local.hour, hour);
        ASSERT_EQ(local.minute, minute);
        ASSERT_GT(r.tick, after);
        ASSERT_LE(r.tick - after, 4 * 366 * kSecondsPerDay);
        // The previous Feb 29 is not after `after`: the tick found is the first.
        const std::int64_t previous = utc(local.date.year - 4, 2, 29, hour, minute) - 3600;
        ASSERT_LE(previous, after);
    }
    // A handful of offset calls per schedule, not one per day searched.
    EXPECT_LT(berlin.calls, 10000 * 12);
}
