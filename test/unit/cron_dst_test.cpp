// SPEC's DST rules in next_tick (src/cron/cron_next_tick.h), in zones written out by rule
// (cron_fake_zones.h): Berlin-like (an hour forward and back), Lord Howe-like (half an hour),
// Santiago-like (southern, negative offsets, changes at local midnight), Apia 2011 (a whole
// local day skipped) and Vostok 1994 (seven hours repeated). Fixed times fire a skipped local
// time once at the change and a repeated one once, at its first occurrence; wall-clock schedules
// fire every matching local time that exists. A minute-by-minute reference of those rules
// checks next_tick on many schedules around every change, and a year of daily ticks is one per
// local day.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cron/cron_calendar.h"
#include "cron/cron_next_tick.h"
#include "cron/cron_parse.h"
#include "cron/cron_utc_text.h"
#include "cron_fake_zones.h"

using namespace jobbuf::cron;
using namespace jobbuf::cron::test;

namespace {

Spec spec_of(const std::string& text)
{
    const ParseResult r = parse(text);
    EXPECT_TRUE(r.ok) << text << ": " << r.error;
    return r.spec;
}

using Texts = std::vector<std::string>;

// The UTC text of the ticks from `after` on, as long as they are before `until`.
Texts ticks_until(const std::string& cron, const FakeZone& fake, std::int64_t after, std::int64_t until)
{
    Texts out;
    const Spec spec = spec_of(cron);
    for (;;) {
        const NextResult r = next_tick(spec, after, zone_of(fake));
        EXPECT_EQ(r.status, NextStatus::kFound) << cron << " after " << format_utc(after) << ": " << r.message;
        if (r.status != NextStatus::kFound || r.tick >= until)
            return out;
        EXPECT_GT(r.tick, after);
        out.push_back(format_utc(r.tick));
        after = r.tick;
    }
}

// The rules, minute by minute (the fake zones other than kLmt change offset on whole minutes,
// so every local whole minute is shown at a UTC whole minute): the ticks after `after` up to
// `until`, at most max_count of them.
std::vector<std::int64_t> reference_ticks(const Spec& spec, const FakeZone& fake, std::int64_t after,
                                          std::int64_t until, std::size_t max_count)
{
    std::vector<std::int64_t> out;
    const std::int64_t first = floor_div(after, 60) * 60 + 60;
    // The latest local time shown before `first` (no zone goes back 17 hours): a local time at or
    // before it is a repeat.
    std::int64_t latest_local = INT64_MIN;
    for (std::int64_t u = first - 17 * 3600; u < first; u += 60)
        latest_local = std::max(latest_local, u + offset_of(fake, u));
    std::int64_t previous = offset_of(fake, first - 60);
    for (std::int64_t u = first; u <= until && out.size() < max_count; u += 60) {
        const std::int64_t offset = offset_of(fake, u);
        const std::int64_t local = u + offset;
        bool tick;
        if (!spec.fixed_time) {
            tick = minute_matches(spec, local);
        } else {
            tick = local > latest_local && minute_matches(spec, local);
            for (std::int64_t skipped = u + previous; !tick && skipped < local; skipped += 60)
                tick = minute_matches(spec, skipped);  // local times a forward change skips at u
        }
        latest_local = std::max(latest_local, local);
        previous = offset;
        if (tick)
            out.push_back(u);
    }
    return out;
}

// The first tick after `after` within `horizon` seconds by the reference, or -1.
std::int64_t reference_next(const Spec& spec, const FakeZone& fake, std::int64_t after, std::int64_t horizon)
{
    const std::vector<std::int64_t> ticks = reference_ticks(spec, fake, after, after + horizon, 1);
    return ticks.empty() ? -1 : ticks.front();
}

// The offset changes of the fake zones that the reference covers, for placing `after` near them.
std::vector<std::int64_t> changes_of(const FakeZone& fake)
{
    std::vector<std::int64_t> out;
    switch (fake.kind) {
        case FakeKind::kApia2011:
            return {utc(2011, 12, 30, 10)};
        case FakeKind::kVostok1994:
            return {utc(1994, 1, 31, 17)};
        default:
            break;
    }
    // Any other zone: find its changes in 2025-2027 by scanning hours, then minutes.
    for (std::int64_t t = utc(2025, 1, 1); t < utc(2028, 1, 1); t += 3600) {
        if (offset_of(fake, t) != offset_of(fake, t + 3600)) {
            std::int64_t u = t;
            while (offset_of(fake, u) == offset_of(fake, t))
                u += 60;
            out.push_back(u);
        }
    }
    return out;
}

}  // namespace

TEST(CronDst, FakeZonesFollowTheRealOnesIn2026)
{
    // As zdump prints them for Europe/Berlin, Australia/Lord_Howe and America/Santiago.
    FakeZone berlin{FakeKind::kBerlin};
    EXPECT_EQ(offset_of(berlin, utc(2026, 3, 29, 0, 59, 59)), 3600);
    EXPECT_EQ(offset_of(berlin, utc(2026, 3, 29, 1)), 7200);
    EXPECT_EQ(offset_of(berlin, utc(2026, 10, 25, 0, 59, 59)), 7200);
    EXPECT_EQ(offset_of(berlin, utc(2026, 10, 25, 1)), 3600);
    FakeZone lord_howe{FakeKind::kLordHowe};
    EXPECT_EQ(offset_of(lord_howe, utc(2026, 4, 4, 14, 59, 59)), 39600);
    EXPECT_EQ(offset_of(lord_howe, utc(2026, 4, 4, 15)), 37800);
    EXPECT_EQ(offset_of(lord_howe, utc(2026, 10, 3, 15, 29, 59)), 37800);
    EXPECT_EQ(offset_of(lord_howe, utc(2026, 10, 3, 15, 30)), 39600);
    FakeZone santiago{FakeKind::kSantiago};
    EXPECT_EQ(offset_of(santiago, utc(2026, 4, 5, 2, 59, 59)), -10800);
    EXPECT_EQ(offset_of(santiago, utc(2026, 4, 5, 3)), -14400);
    EXPECT_EQ(offset_of(santiago, utc(2026, 9, 6, 3, 59, 59)), -14400);
    EXPECT_EQ(offset_of(santiago, utc(2026, 9, 6, 4)), -10800);
    EXPECT_EQ(changes_of(berlin).size(), 6u);
    EXPECT_EQ(changes_of(lord_howe).size(), 6u);
    EXPECT_EQ(changes_of(santiago).size(), 6u);
}

TEST(CronDst, FixedTimeSkippedBySpringForwardFiresOnceAtTheChange)
{
    FakeZone berlin{FakeKind::kBerlin};
    // 02:30 does not exist on 2026-03-29 in Berlin: the tick is 03:00 CEST, the change itself.
    EXPECT_EQ(ticks_until("30 2 * * *", berlin, utc(2026, 3, 28), utc(2026, 3, 31)),
              (Texts{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}));
    // Several skipped times of one change make one tick, also with a time just after the gap.
    EXPECT_EQ(ticks_until("0,30 2 * * *", berlin, utc(2026, 3, 28, 12), utc(2026, 3, 31)),
              (Texts{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T00:30:00Z"}));
    EXPECT_EQ(ticks_until("0 2,3 * * *", berlin, utc(2026, 3, 28, 12), utc(2026, 3, 30, 12)),
              (Texts{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T01:00:00Z"}));
    // Times next to the gap are untouched.
    EXPECT_EQ(ticks_until("59 1 * * *", berlin, utc(2026, 3, 28, 12), utc(2026, 3, 29, 12)),
              (Texts{"2026-03-29T00:59:00Z"}));
    EXPECT_EQ(ticks_until("0 3 * * *", berlin, utc(2026, 3, 28, 12), utc(2026, 3, 30)),
              (Texts{"2026-03-29T01:00:00Z"}));
    // From just before and at the change.
    EXPECT_EQ(next_tick(spec_of("30 2 * * *"), utc(2026, 3, 29, 0, 59, 59), zone_of(berlin)).tick, utc(2026, 3, 29, 1));
    EXPECT_EQ(next_tick(spec_of("30 2 * * *"), utc(2026, 3, 29, 1), zone_of(berlin)).tick, utc(2026, 3, 30, 0, 30));
    // A fixed range counts as fixed.
    EXPECT_EQ(ticks_until("15 1-2 * * *", berlin, utc(2026, 3, 28, 12), utc(2026, 3, 30)),
              (Texts{"2026-03-29T00:15:00Z", "2026-03-29T01:00:00Z", "2026-03-29T23:15:00Z"}));
}

TEST(CronDst, FixedTimeRepeatedByFallBackFiresOnceAtItsFirstOccurrence)
{
    FakeZone berlin{FakeKind::kBerlin};
    // 02:30 happens twice on 2026-10-25 in Berlin (00:30Z in CEST, 01:30Z in CET): once.
    EXPECT_EQ(ticks_until("30 2 * * *", berlin, utc(2026, 10, 24), utc(2026, 10, 27)),
              (Texts{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}));
    EXPECT_EQ(ticks_until("30 1-3 * * *", berlin, utc(2026, 10, 24, 12), utc(2026, 10, 25, 12)),
              (Texts{"2026-10-24T23:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T02:30:00Z"}));
    // From inside the second pass: the first occurrence is past, so the next day's.
    EXPECT_EQ(next_tick(spec_of("30 2 * * *"), utc(2026, 10, 25, 1, 10), zone_of(berlin)).tick,
              utc(2026, 10, 26, 1, 30));
    EXPECT_EQ(next_tick(spec_of("30 2 * * *"), utc(2026, 10, 25, 0, 40), zone_of(berlin)).tick,
              utc(2026, 10, 26, 1, 30));
    EXPECT_EQ(next_tick(spec_of("30 2 * * *"), utc(2026, 10, 25, 0, 29, 59), zone_of(berlin)).tick,
              utc(2026, 10, 25, 0, 30));
}

TEST(CronDst, WallClockFiresBothPassesOfARepeatedHour)
{
    FakeZone berlin{FakeKind::kBerlin};
    EXPECT_EQ(ticks_until("*/30 * * * *", berlin, utc(2026, 10, 24, 23, 45), utc(2026, 10, 25, 2, 1)),
              (Texts{"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z",
                     "2026-10-25T02:00:00Z"}));
    EXPECT_EQ(ticks_until("30 * * * *", berlin, utc(2026, 10, 24, 23), utc(2026, 10, 25, 3)),
              (Texts{"2026-10-24T23:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:30:00Z"}));
    EXPECT_EQ(ticks_until("30 1-3/1 * * *", berlin, utc(2026, 10, 24, 12), utc(2026, 10, 25, 12)),
              (Texts{"2026-10-24T23:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:30:00Z"}));
    // Every minute of 02:00-02:59, twice.
    EXPECT_EQ(ticks_until("* 2 * * *", berlin, utc(2026, 10, 24, 12), utc(2026, 10, 25, 12)).size(), 120u);
    // From inside the first pass, the next tick may be in the second pass or the first.
    EXPECT_EQ(next_tick(spec_of("0 * * * *"), utc(2026, 10, 25, 0, 40), zone_of(berlin)).tick,
              utc(2026, 10, 25, 1));  // 02:00 CET
    EXPECT_EQ(next_tick(spec_of("* * * * *"), utc(2026, 10, 25, 0, 10), zone_of(berlin)).tick,
              utc(2026, 10, 25, 0, 11));
    EXPECT_EQ(next_tick(spec_of("10 * * * *"), utc(2026, 10, 25, 0, 10), zone_of(berlin)).tick,
              utc(2026, 10, 25, 1, 10));
}

TEST(CronDst, WallClockSkipsTimesThatDoNotExist)
{
    FakeZone berlin{FakeKind::kBerlin};
    EXPECT_EQ(ticks_until("*/30 * * * *", berlin, utc(2026, 3, 29, 0, 15), utc(2026, 3, 29, 1, 31)),
              (Texts{"2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"}));
    EXPECT_EQ(ticks_until("30 * * * *", berlin, utc(2026, 3, 28, 23), utc(2026, 3, 29, 2)),
              (Texts{"2026-03-28T23:30:00Z", "2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z"}));
    // Nothing at all of 02:xx on that day.
    EXPECT_EQ(next_tick(spec_of("* 2 * * *"), utc(2026, 3, 29), zone_of(berlin)).tick, utc(2026, 3, 30));
    EXPECT_EQ(next_tick(spec_of("30 */2 * * *"), utc(2026, 3, 29, 0, 30), zone_of(berlin)).tick,
              utc(2026, 3, 29, 2, 30));  // 04:30 CEST
}

TEST(CronDst, HalfHourChangesOfLordHowe)
{
    FakeZone lord_howe{FakeKind::kLordHowe};
    // 2026-10-04: 02:00 (+10:30) becomes 02:30 (+11); 02:00-02:29 never happens.
    EXPECT_EQ(ticks_until("15 2 * * *", lord_howe, utc(2026, 10, 2), utc(2026, 10, 5)),
              (Texts{"2026-10-02T15:45:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"}));
    EXPECT_EQ(ticks_until("30 2 * * *", lord_howe, utc(2026, 10, 2), utc(2026, 10, 5)),
              (Texts{"2026-10-02T16:00:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:30:00Z"}));
    EXPECT_EQ(ticks_until("*/15 2 * * *", lord_howe, utc(2026, 10, 3, 12), utc(2026, 10, 3, 17)),
              (Texts{"2026-10-03T15:30:00Z", "2026-10-03T15:45:00Z"}));
    // 2026-04-05: 02:00 (+11) becomes 01:30 (+10:30); 01:30-01:59 happens twice.
    EXPECT_EQ(ticks_until("45 1 * * *", lord_howe, utc(2026, 4, 4), utc(2026, 4, 5, 12)),
              (Texts{"2026-04-04T14:45:00Z"}));
    EXPECT_EQ(ticks_until("45 * * * *", lord_howe, utc(2026, 4, 4, 13), utc(2026, 4, 4, 17)),
              (Texts{"2026-04-04T13:45:00Z", "2026-04-04T14:45:00Z", "2026-04-04T15:15:00Z", "2026-04-04T16:15:00Z"}));
    EXPECT_EQ(ticks_until("0 2 * * *", lord_howe, utc(2026, 4, 4), utc(2026, 4, 5, 12)),
              (Texts{"2026-04-04T15:30:00Z"}));  // 02:00 is not repeated: +10:30
}

TEST(CronDst, SouthernMidnightChangesOfSantiago)
{
    FakeZone santiago{FakeKind::kSantiago};
    // 2026-09-06: midnight (-4) becomes 01:00 (-3); the daily midnight tick is the change.
    EXPECT_EQ(ticks_until("0 0 * * *", santiago, utc(2026, 9, 4), utc(2026, 9, 8)),
              (Texts{"2026-09-04T04:00:00Z", "2026-09-05T04:00:00Z", "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z"}));
    EXPECT_EQ(ticks_until("30 0 * * *", santiago, utc(2026, 9, 5, 12), utc(2026, 9, 7, 12)),
              (Texts{"2026-09-06T04:00:00Z", "2026-09-07T03:30:00Z"}));
    EXPECT_EQ(ticks_until("30 * * * *", santiago, utc(2026, 9, 6, 2), utc(2026, 9, 6, 6)),
              (Texts{"2026-09-06T02:30:00Z", "2026-09-06T03:30:00Z", "2026-09-06T04:30:00Z",
                     "2026-09-06T05:30:00Z"}));  // 22:30, 23:30, 01:30, 02:30 local
    // 2026-04-05: midnight (-3) becomes 23:00 Saturday (-4); 23:00-23:59 Saturday happens twice.
    EXPECT_EQ(ticks_until("30 23 * * *", santiago, utc(2026, 4, 4, 12), utc(2026, 4, 6, 12)),
              (Texts{"2026-04-05T02:30:00Z", "2026-04-06T03:30:00Z"}));
    EXPECT_EQ(ticks_until("30 23 * * sat", santiago, utc(2026, 4, 4, 12), utc(2026, 4, 12)),
              (Texts{"2026-04-05T02:30:00Z"}));
    EXPECT_EQ(ticks_until("*/30 23 * * *", santiago, utc(2026, 4, 5, 1), utc(2026, 4, 5, 5)),
              (Texts{"2026-04-05T02:00:00Z", "2026-04-05T02:30:00Z", "2026-04-05T03:00:00Z", "2026-04-05T03:30:00Z"}));
    EXPECT_EQ(ticks_until("0 0 * * *", santiago, utc(2026, 4, 4, 12), utc(2026, 4, 6, 12)),
              (Texts{"2026-04-05T04:00:00Z", "2026-04-06T04:00:00Z"}));
}

TEST(CronDst, AWholeLocalDaySkipped)
{
    FakeZone apia{FakeKind::kApia2011};  // 2011-12-29 24:00 (-10) is 2011-12-31 00:00 (+14)
    EXPECT_EQ(ticks_until("0 12 * * *", apia, utc(2011, 12, 29), utc(2011, 12, 31, 12)),
              (Texts{"2011-12-29T22:00:00Z", "2011-12-30T10:00:00Z", "2011-12-30T22:00:00Z"}));
    EXPECT_EQ(ticks_until("0 */12 * * *", apia, utc(2011, 12, 29), utc(2011, 12, 31, 12)),
              (Texts{"2011-12-29T10:00:00Z", "2011-12-29T22:00:00Z", "2011-12-30T10:00:00Z", "2011-12-30T22:00:00Z",
                     "2011-12-31T10:00:00Z"}));
    EXPECT_EQ(next_tick(spec_of("0 0 30 12 *"), utc(2011, 12, 1), zone_of(apia)).tick, utc(2011, 12, 30, 10));
    EXPECT_EQ(next_tick(spec_of("0 9 30 12 *"), utc(2011, 12, 30, 10), zone_of(apia)).tick,
              utc(2012, 12, 29, 19));  // a year later, in +14
    EXPECT_EQ(next_tick(spec_of("* * 30 12 *"), utc(2011, 12, 1), zone_of(apia)).tick, utc(2012, 12, 29, 10));
}

TEST(CronDst, SevenHoursRepeated)
{
    FakeZone vostok{FakeKind::kVostok1994};  // 1994-01-31T17:00Z: 1994-02-01 00:00 (+7) is Jan 31 17:00 (0)
    EXPECT_EQ(ticks_until("0 20 * * *", vostok, utc(1994, 1, 30), utc(1994, 2, 2)),
              (Texts{"1994-01-30T13:00:00Z", "1994-01-31T13:00:00Z", "1994-02-01T20:00:00Z"}));
    EXPECT_EQ(ticks_until("0 */4 * * *", vostok, utc(1994, 1, 31, 12), utc(1994, 2, 1, 5)),
              (Texts{"1994-01-31T13:00:00Z", "1994-01-31T20:00:00Z", "1994-02-01T00:00:00Z", "1994-02-01T04:00:00Z"}));
    EXPECT_EQ(next_tick(spec_of("0 */4 * * *"), utc(1994, 1, 31, 16, 59, 59), zone_of(vostok)).tick,
              utc(1994, 1, 31, 20));
    EXPECT_EQ(next_tick(spec_of("0 20 * * *"), utc(1994, 1, 31, 16, 59, 59), zone_of(vostok)).tick,
              utc(1994, 2, 1, 20));
    EXPECT_EQ(next_tick(spec_of("0 18 * * *"), utc(1994, 1, 31, 10, 59), zone_of(vostok)).tick, utc(1994, 1, 31, 11));
}

TEST(CronDst, AYearOfDailyTicksIsOnePerLocalDay)
{
    struct Case {
        FakeKind kind;
        const char* cron;
    };
    const Case cases[] = {{FakeKind::kBerlin, "0 2 * * *"},    {FakeKind::kBerlin, "30 2 * * *"},
                          {FakeKind::kBerlin, "59 23 * * *"},  {FakeKind::kLordHowe, "0 2 * * *"},
                          {FakeKind::kLordHowe, "15 2 * * *"}, {FakeKind::kLordHowe, "45 1 * * *"},
                          {FakeKind::kSantiago, "0 0 * * *"},  {FakeKind::kSantiago, "30 23 * * *"},
                          {FakeKind::kBerlin, "@daily"}};
    for (const Case& c : cases) {
        FakeZone fake{c.kind};
        const Spec spec = spec_of(c.cron);
        std::int64_t after = utc(2026, 1, 1, 12);
        std::set<std::int64_t> local_days;
        std::int64_t last_day = 0;
        for (int i = 0; i < 365; ++i) {
            const NextResult r = next_tick(spec, after, zone_of(fake));
            ASSERT_EQ(r.status, NextStatus::kFound);
            const std::int64_t day = floor_div(r.tick + offset_of(fake, r.tick), kSecondsPerDay);
            if (i > 0) {
                ASSERT_EQ(day, last_day + 1) << c.cron << ": " << format_utc(r.tick);
            }
            local_days.insert(day);
            last_day = day;
            after = r.tick;
        }
        EXPECT_EQ(local_days.size(), 365u) << c.cron;
    }
}

TEST(CronDst, AgreesWithTheMinuteByMinuteRulesAroundEveryChange)
{
    const char* crons[] = {"30 2 * * *",     "0,30 2 * * *",     "0 2,3 * * *",     "15 1-3 * * *",  "* 2 * * *",
                           "*/30 * * * *",   "30 * * * *",       "5-59/20 * * * *", "*/7 */2 * * *", "0 0 * * *",
                           "30 23 * * *",    "0 1 * * sun",      "45 1 * * *",      "15 2 * * *",    "* * * * *",
                           "0 */4 * * *",    "0 12 * * *",       "59 0,1,2 * * *",  "1 0-3 * * *",   "0-5 2 * * *",
                           "0 2 * * 0",      "0 2 25-31 3,10 *", "@hourly",         "@daily",        "20 17-23 * * *",
                           "0 0 30,31 12 *", "50 16 * * *",      "0 2 1-7 * sun",   "*/5 0-3 * * *", "0 22 * * sat"};
    const FakeKind kinds[] = {FakeKind::kBerlin, FakeKind::kLordHowe, FakeKind::kSantiago, FakeKind::kApia2011,
                              FakeKind::kVostok1994};
    std::mt19937_64 random(20260329);
    int compared = 0;
    for (FakeKind kind : kinds) {
        FakeZone fake{kind};
        const std::vector<std::int64_t> changes = changes_of(fake);
        ASSERT_FALSE(changes.empty());
        for (const char* cron : crons) {
            const Spec spec = spec_of(cron);
            for (int i = 0; i < 12; ++i) {
                const std::int64_t change = changes[random() % changes.size()];
                // Around the change, at second, minute and hour edges.
                const std::int64_t deltas[] = {-1, 0, 1, 59, 60, -60};
                std::int64_t after = change + static_cast<std::int64_t>(random() % (60 * 3600)) - 30 * 3600;
                if (i < 6)
                    after = change + deltas[i] + static_cast<std::int64_t>(random() % 8 - 4) * 1800;
                const std::int64_t horizon = 9 * kSecondsPerDay;
                const std::int64_t expected = reference_next(spec, fake, after, horizon);
                const NextResult r = next_tick(spec, after, zone_of(fake));
                if (expected < 0) {
                    EXPECT_TRUE(r.status != NextStatus::kFound || r.tick > after + horizon) << cron;
                    continue;
                }
                ASSERT_EQ(r.status, NextStatus::kFound) << cron << " after " << format_utc(after) << ": " << r.message;
                ASSERT_EQ(format_utc(r.tick), format_utc(expected))
                    << cron << " after " << format_utc(after) << " (fixed_time " << spec.fixed_time << ")";
                ++compared;
            }
        }
    }
    EXPECT_GT(compared, 1000);
}

TEST(CronDst, SequencesOverAYearAgreeWithTheMinuteByMinuteRules)
{
    // Every tick of a year, for schedules that fire a few times a day, is the reference's.
    const char* crons[] = {"30 2 * * *", "0 */6 * * *", "15 1-3 * * *", "*/20 2 * * *", "0 0,23 * * *"};
    const FakeKind kinds[] = {FakeKind::kBerlin, FakeKind::kLordHowe, FakeKind::kSantiago};
    for (FakeKind kind : kinds) {
        FakeZone fake{kind};
        for (const char* cron : crons) {
            const Spec spec = spec_of(cron);
            const std::int64_t start = utc(2026, 1, 1);
            const std::int64_t end = utc(2027, 1, 1);
            std::vector<std::int64_t> found;
            for (std::int64_t after = start;;) {
                const NextResult r = next_tick(spec, after, zone_of(fake));
                ASSERT_EQ(r.status, NextStatus::kFound);
                if (r.tick > end)
                    break;
                found.push_back(r.tick);
                after = r.tick;
            }
            const std::vector<std::int64_t> expected = reference_ticks(spec, fake, start, end, SIZE_MAX);
            EXPECT_GT(expected.size(), 364u) << cron;
            ASSERT_EQ(found.size(), expected.size()) << cron;
            for (std::size_t i = 0; i < found.size(); ++i)
                ASSERT_EQ(format_utc(found[i]), format_utc(expected[i])) << cron << " tick " << i;
        }
    }
}
