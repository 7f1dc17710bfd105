// Reading cron text (src/cron/cron_parse.h): every field form, names and case, Vixie's
// restricted-day flags, the DST "fixed time" flag, macros, "N seconds", white space, and every
// refusal with the field, the text at fault and the valid form in its one-line message.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "cron/cron_parse.h"

using namespace jobbuf::cron;

namespace {

std::uint64_t bits(std::initializer_list<int> values)
{
    std::uint64_t mask = 0;
    for (int v : values)
        mask |= std::uint64_t{1} << v;
    return mask;
}

std::uint64_t bit_range(int low, int high, int step = 1)
{
    std::uint64_t mask = 0;
    for (int v = low; v <= high; v += step)
        mask |= std::uint64_t{1} << v;
    return mask;
}

Spec parsed(const std::string& text)
{
    const ParseResult r = parse(text);
    EXPECT_TRUE(r.ok) << text << ": " << r.error;
    EXPECT_EQ(r.error, "");
    return r.spec;
}

std::string refusal(const std::string& text)
{
    const ParseResult r = parse(text);
    EXPECT_FALSE(r.ok) << text;
    EXPECT_NE(r.error, "") << text;
    EXPECT_EQ(r.error.find('\n'), std::string::npos) << r.error;
    return r.error;
}

bool same(const Spec& a, const Spec& b)
{
    return a.minutes == b.minutes && a.hours == b.hours && a.days == b.days && a.months == b.months &&
           a.weekdays == b.weekdays && a.day_restricted == b.day_restricted &&
           a.weekday_restricted == b.weekday_restricted && a.fixed_time == b.fixed_time &&
           a.every_seconds == b.every_seconds;
}

#define EXPECT_REFUSED(text, ...)                                                                                      \
    do {                                                                                                               \
        const std::string message_ = refusal(text);                                                                    \
        for (const char* part_ : {__VA_ARGS__})                                                                        \
            EXPECT_NE(message_.find(part_), std::string::npos)                                                         \
                << "refusal of \"" << (text) << "\" lacks \"" << part_ << "\": " << message_;                          \
    } while (0)

}  // namespace

TEST(CronParse, StarsMatchEveryValue)
{
    const Spec s = parsed("* * * * *");
    EXPECT_EQ(s.minutes, bit_range(0, 59));
    EXPECT_EQ(s.hours, bit_range(0, 23));
    EXPECT_EQ(s.days, bit_range(1, 31));
    EXPECT_EQ(s.months, bit_range(1, 12));
    EXPECT_EQ(s.weekdays, bit_range(0, 6));
    EXPECT_FALSE(s.day_restricted);
    EXPECT_FALSE(s.weekday_restricted);
    EXPECT_FALSE(s.fixed_time);
    EXPECT_EQ(s.every_seconds, 0);
}

TEST(CronParse, SingleValuesAtBothEndsOfEachField)
{
    Spec s = parsed("0 0 1 1 0");
    EXPECT_EQ(s.minutes, bits({0}));
    EXPECT_EQ(s.hours, bits({0}));
    EXPECT_EQ(s.days, bits({1}));
    EXPECT_EQ(s.months, bits({1}));
    EXPECT_EQ(s.weekdays, bits({0}));
    s = parsed("59 23 31 12 6");
    EXPECT_EQ(s.minutes, bits({59}));
    EXPECT_EQ(s.hours, bits({23}));
    EXPECT_EQ(s.days, bits({31}));
    EXPECT_EQ(s.months, bits({12}));
    EXPECT_EQ(s.weekdays, bits({6}));
    s = parsed("05 007 09 08 1");  // leading zeros are decimal
    EXPECT_EQ(s.minutes, bits({5}));
    EXPECT_EQ(s.hours, bits({7}));
    EXPECT_EQ(s.days, bits({9}));
    EXPECT_EQ(s.months, bits({8}));
}

TEST(CronParse, RangesListsAndMixes)
{
    const Spec s = parsed("1-5 0,12,23 1,15-17,31 2-4,11 1-3,5");
    EXPECT_EQ(s.minutes, bits({1, 2, 3, 4, 5}));
    EXPECT_EQ(s.hours, bits({0, 12, 23}));
    EXPECT_EQ(s.days, bits({1, 15, 16, 17, 31}));
    EXPECT_EQ(s.months, bits({2, 3, 4, 11}));
    EXPECT_EQ(s.weekdays, bits({1, 2, 3, 5}));
    EXPECT_EQ(parsed("7-7 * * * *").minutes, bits({7}));
    EXPECT_EQ(parsed("0-59 * * * *").minutes, bit_range(0, 59));
    EXPECT_EQ(parsed("5,5,5 * * * *").minutes, bits({5}));  // repeats are harmless
}

TEST(CronParse, StepsOverStarsRangesAndSingleValues)
{
    EXPECT_EQ(parsed("*/15 * * * *").minutes, bits({0, 15, 30, 45}));
    EXPECT_EQ(parsed("5-59/20 * * * *").minutes, bits({5, 25, 45}));
    EXPECT_EQ(parsed("5/15 * * * *").minutes, bits({5, 20, 35, 50}));  // a/n: a through 59
    EXPECT_EQ(parsed("0-10/3,50 * * * *").minutes, bits({0, 3, 6, 9, 50}));
    EXPECT_EQ(parsed("*/1 * * * *").minutes, bit_range(0, 59));
    EXPECT_EQ(parsed("*/60 * * * *").minutes, bits({0}));  // the largest step: the field's 60 values
    EXPECT_EQ(parsed("0 */7 * * *").hours, bits({0, 7, 14, 21}));
    EXPECT_EQ(parsed("0 22/1 * * *").hours, bits({22, 23}));
    EXPECT_EQ(parsed("0 0 */10 * *").days, bits({1, 11, 21, 31}));
    EXPECT_EQ(parsed("0 0 2/15 * *").days, bits({2, 17}));
    EXPECT_EQ(parsed("0 0 1 */5 *").months, bits({1, 6, 11}));
    EXPECT_EQ(parsed("0 0 1 jan-dec/4 *").months, bits({1, 5, 9}));
    EXPECT_EQ(parsed("0 0 * * */2").weekdays, bits({0, 2, 4, 6}));  // * is 0-7 for weekdays
    EXPECT_EQ(parsed("0 0 * * 1/2").weekdays, bits({0, 1, 3, 5}));  // 1,3,5,7 and 7 is Sunday
    EXPECT_EQ(parsed("0 0 * * */8").weekdays, bits({0}));
    EXPECT_EQ(parsed("0 0 * * mon/2").weekdays, bits({1, 3, 5, 0}));  // a name, then through 7
}

TEST(CronParse, MonthAndWeekdayNamesInAnyCase)
{
    EXPECT_EQ(parsed("0 0 1 jan *").months, bits({1}));
    EXPECT_EQ(parsed("0 0 1 DEC *").months, bits({12}));
    EXPECT_EQ(parsed("0 0 1 Feb,aPr,jun-AUG *").months, bits({2, 4, 6, 7, 8}));
    EXPECT_EQ(parsed("0 0 1 jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec *").months, bit_range(1, 12));
    EXPECT_EQ(parsed("0 0 1 3-jun *").months, bits({3, 4, 5, 6}));  // names and numbers mix
    EXPECT_EQ(parsed("0 9 * * mon-fri").weekdays, bits({1, 2, 3, 4, 5}));
    EXPECT_EQ(parsed("0 9 * * SUN,Sat").weekdays, bits({0, 6}));
    EXPECT_EQ(parsed("0 9 * * sun,mon,tue,wed,thu,fri,sat").weekdays, bit_range(0, 6));
    EXPECT_EQ(parsed("0 9 * * sun-sat/3").weekdays, bits({0, 3, 6}));
}

TEST(CronParse, WeekdaySevenIsSunday)
{
    EXPECT_TRUE(same(parsed("0 0 * * 7"), parsed("0 0 * * 0")));
    EXPECT_TRUE(same(parsed("0 0 * * 7"), parsed("0 0 * * sun")));
    EXPECT_EQ(parsed("0 0 * * 5-7").weekdays, bits({5, 6, 0}));
    EXPECT_EQ(parsed("0 0 * * 0,7").weekdays, bits({0}));
    EXPECT_EQ(parsed("0 0 * * 0-7").weekdays, bit_range(0, 6));
}

TEST(CronParse, RestrictedDayFieldsAreTheOnesNotStartingWithStar)
{
    Spec s = parsed("0 0 1 * *");
    EXPECT_TRUE(s.day_restricted);
    EXPECT_FALSE(s.weekday_restricted);
    s = parsed("0 0 * * 1");
    EXPECT_FALSE(s.day_restricted);
    EXPECT_TRUE(s.weekday_restricted);
    s = parsed("0 0 13 * fri");
    EXPECT_TRUE(s.day_restricted);
    EXPECT_TRUE(s.weekday_restricted);
    // As Vixie: a stepped star is still a star; a full range is not.
    s = parsed("0 0 */2 * */2");
    EXPECT_FALSE(s.day_restricted);
    EXPECT_FALSE(s.weekday_restricted);
    s = parsed("0 0 1-31 * 0-7");
    EXPECT_TRUE(s.day_restricted);
    EXPECT_TRUE(s.weekday_restricted);
}

TEST(CronParse, FixedTimeMeansNoStarAndNoStepInMinuteOrHour)
{
    EXPECT_TRUE(parsed("30 2 * * *").fixed_time);
    EXPECT_TRUE(parsed("0,30 1,2 * * *").fixed_time);
    EXPECT_TRUE(parsed("0-10 1-3 * * *").fixed_time);  // ranges count as fixed, as in Vixie
    EXPECT_TRUE(parsed("0 0 */2 * */3").fixed_time);   // the day fields do not take part
    EXPECT_FALSE(parsed("* 2 * * *").fixed_time);
    EXPECT_FALSE(parsed("30 * * * *").fixed_time);
    EXPECT_FALSE(parsed("*/30 * * * *").fixed_time);
    EXPECT_FALSE(parsed("0 */2 * * *").fixed_time);
    EXPECT_FALSE(parsed("5-59/20 2 * * *").fixed_time);  // a step, as SPEC says
    EXPECT_FALSE(parsed("0 1/2 * * *").fixed_time);
    EXPECT_FALSE(parsed("0,* 2 * * *").fixed_time);
}

TEST(CronParse, MacrosAreTheirFiveFields)
{
    EXPECT_TRUE(same(parsed("@yearly"), parsed("0 0 1 1 *")));
    EXPECT_TRUE(same(parsed("@annually"), parsed("0 0 1 1 *")));
    EXPECT_TRUE(same(parsed("@monthly"), parsed("0 0 1 * *")));
    EXPECT_TRUE(same(parsed("@weekly"), parsed("0 0 * * 0")));
    EXPECT_TRUE(same(parsed("@daily"), parsed("0 0 * * *")));
    EXPECT_TRUE(same(parsed("@midnight"), parsed("0 0 * * *")));
    EXPECT_TRUE(same(parsed("@hourly"), parsed("0 * * * *")));
    EXPECT_TRUE(same(parsed("@DAILY"), parsed("@daily")));
    EXPECT_TRUE(same(parsed("  @Hourly\t"), parsed("@hourly")));
    EXPECT_TRUE(parsed("@daily").fixed_time);
    EXPECT_TRUE(parsed("@weekly").fixed_time);
    EXPECT_FALSE(parsed("@hourly").fixed_time);  // Vixie: its hour is '*'
    EXPECT_FALSE(parsed("@weekly").day_restricted);
    EXPECT_TRUE(parsed("@weekly").weekday_restricted);
}

TEST(CronParse, EverySeconds)
{
    for (int n = 1; n <= 59; ++n) {
        const Spec s = parsed(std::to_string(n) + " seconds");
        EXPECT_EQ(s.every_seconds, n);
        EXPECT_EQ(s.minutes, 0u);
        EXPECT_EQ(s.hours, 0u);
        EXPECT_EQ(s.days, 0u);
        EXPECT_EQ(s.months, 0u);
        EXPECT_EQ(s.weekdays, 0u);
        EXPECT_FALSE(s.fixed_time);
    }
    EXPECT_EQ(parsed("1 second").every_seconds, 1);
    EXPECT_EQ(parsed("30 second").every_seconds, 30);  // singular or plural, whatever N
    EXPECT_EQ(parsed("5 SECONDS").every_seconds, 5);
    EXPECT_EQ(parsed(" \t10 \t Seconds \n").every_seconds, 10);
    EXPECT_EQ(parsed("05 seconds").every_seconds, 5);
}

TEST(CronParse, WhiteSpaceAroundAndBetweenFields)
{
    const Spec plain = parsed("5 4 * * 1");
    EXPECT_TRUE(same(parsed("  5 4 * * 1  "), plain));
    EXPECT_TRUE(same(parsed("5\t4\t*\t*\t1"), plain));
    EXPECT_TRUE(same(parsed("5   4 \t *  *    1"), plain));
    EXPECT_TRUE(same(parsed("\n5 4 * * 1\n"), plain));
    EXPECT_TRUE(same(parsed("5 4 * * 1\r\n"), plain));
}

TEST(CronParse, OutOfRangeValuesNameTheFieldAndItsValues)
{
    EXPECT_REFUSED("61 * * * *", "minute field \"61\"", "61 is out of range", "0-59");
    EXPECT_REFUSED("60 * * * *", "minute field", "0-59");
    EXPECT_REFUSED("0-60 * * * *", "minute field \"0-60\"", "60 is out of range", "0-59");
    EXPECT_REFUSED("* 24 * * *", "hour field \"24\"", "0-23");
    EXPECT_REFUSED("* * 0 * *", "day-of-month field \"0\"", "1-31");
    EXPECT_REFUSED("* * 32 * *", "day-of-month field \"32\"", "1-31");
    EXPECT_REFUSED("* * * 0 *", "month field \"0\"", "1-12 or jan-dec");
    EXPECT_REFUSED("* * * 13 *", "month field \"13\"", "1-12 or jan-dec");
    EXPECT_REFUSED("* * * * 8", "weekday field \"8\"", "0-7 (0 and 7 are Sunday) or sun-sat");
    EXPECT_REFUSED("99999999999999999999 * * * *", "minute field", "out of range", "0-59");
    EXPECT_REFUSED("1,2,75 * * * *", "minute field \"1,2,75\"", "75 is out of range");
    EXPECT_REFUSED("70/5 * * * *", "minute field", "70 is out of range");
}

TEST(CronParse, BackwardRangesAreRefused)
{
    EXPECT_REFUSED("5-1 * * * *", "minute field \"5-1\"", "runs backwards", "0-59");
    EXPECT_REFUSED("* 23-1 * * *", "hour field", "runs backwards");
    EXPECT_REFUSED("* * 31-1 * *", "day-of-month field", "runs backwards");
    EXPECT_REFUSED("* * * dec-jan *", "month field \"dec-jan\"", "runs backwards", "jan-dec");
    EXPECT_REFUSED("* * * * fri-sun", "weekday field \"fri-sun\"", "runs backwards", "0-7");
    EXPECT_REFUSED("* * * * 7-1", "weekday field", "runs backwards");
}

TEST(CronParse, BadStepsAreRefused)
{
    EXPECT_REFUSED("*/0 * * * *", "minute field \"*/0\"", "step of 0", "0-59");
    EXPECT_REFUSED("1-5/0 * * * *", "minute field", "step of 0");
    EXPECT_REFUSED("*/61 * * * *", "minute field", "step 61 is larger than the field's 60 values");
    EXPECT_REFUSED("0 */25 * * *", "hour field", "larger than the field's 24 values");
    EXPECT_REFUSED("0 0 * * */9", "weekday field", "larger than the field's 8 values");
    EXPECT_REFUSED("*/ * * * *", "minute field \"*/\"", "a step needs a number after '/'", "*/15");
    EXPECT_REFUSED("*/x * * * *", "minute field", "step \"x\" is not a whole number");
    EXPECT_REFUSED("*/-5 * * * *", "minute field", "is not a whole number");
    EXPECT_REFUSED("/5 * * * *", "minute field \"/5\"", "before '/'");
    EXPECT_REFUSED("1/2/3 * * * *", "minute field", "not a whole number");
}

TEST(CronParse, EmptyListItemsAreRefused)
{
    EXPECT_REFUSED("1,,2 * * * *", "minute field \"1,,2\"", "empty", "a list such as 1,15,30");
    EXPECT_REFUSED("1, * * * *", "minute field \"1,\"", "empty");
    EXPECT_REFUSED(",1 * * * *", "minute field \",1\"", "empty");
    EXPECT_REFUSED("* * * * ,", "weekday field", "empty");
}

TEST(CronParse, GarbageIsRefusedWithTheValidForm)
{
    EXPECT_REFUSED("x * * * *", "minute field \"x\"", "\"x\" is not a number", "a range such as 1-5", "0-59");
    EXPECT_REFUSED("1x * * * *", "minute field \"1x\"", "not a number");
    EXPECT_REFUSED("* mon * * *", "hour field \"mon\"", "not a number", "0-23");
    EXPECT_REFUSED("* * jan * *", "day-of-month field", "not a number");
    EXPECT_REFUSED("* * * foo *", "month field \"foo\"", "neither a number nor a month name", "jan-dec");
    EXPECT_REFUSED("* * * january *", "month field", "neither a number nor a month name");
    EXPECT_REFUSED("* * * * monday", "weekday field \"monday\"", "neither a number nor a weekday name", "sun-sat");
    EXPECT_REFUSED("* * * * mon-friday", "weekday field", "\"friday\"");
    EXPECT_REFUSED("*-5 * * * *", "minute field \"*-5\"", "'*' stands alone");
    EXPECT_REFUSED("** * * * *", "minute field \"**\"", "'*' stands alone");
    EXPECT_REFUSED("5- * * * *", "minute field \"5-\"", "a value on each side of '-'");
    EXPECT_REFUSED("-5 * * * *", "minute field \"-5\"", "a value on each side of '-'");
    EXPECT_REFUSED("1-2-3 * * * *", "minute field \"1-2-3\"", "a single '-'");
    EXPECT_REFUSED("1.5 * * * *", "minute field", "not a number");
    EXPECT_REFUSED("+5 * * * *", "minute field", "not a number");
    EXPECT_REFUSED("L * * * *", "minute field", "not a number");
    EXPECT_REFUSED("0 0 ? * *", "day-of-month field \"?\"", "not a number");
    EXPECT_REFUSED("0 0 * * 1#2", "weekday field", "neither a number nor a weekday name");
    EXPECT_REFUSED("0 0 * * 5L", "weekday field");
}

TEST(CronParse, TheFirstBadFieldIsTheOneReported)
{
    EXPECT_REFUSED("61 25 * * *", "minute field");
    EXPECT_REFUSED("1 25 32 * *", "hour field");
}

TEST(CronParse, WrongNumbersOfFieldsAreRefused)
{
    EXPECT_REFUSED("* * * *", "expected five fields (minute hour day-of-month month weekday)", "@daily",
                   "\"N seconds\" with N from 1 to 59", "got 4 fields in \"* * * *\"");
    EXPECT_REFUSED("* * * * * *", "expected five fields", "got 6 fields");
    EXPECT_REFUSED("* * * * * /bin/true", "got 6 fields");
    EXPECT_REFUSED("1 2 3 4 5 6 7 8", "got 8 fields");
    EXPECT_REFUSED("daily", "expected five fields", "got 1 field in \"daily\"");
    EXPECT_REFUSED("5 minutes", "got 2 fields");
    EXPECT_REFUSED("5seconds", "got 1 field");
}

TEST(CronParse, EmptyTextIsRefused)
{
    EXPECT_REFUSED("", "empty cron text", "expected five fields");
    EXPECT_REFUSED(" \t\n ", "empty cron text");
}

TEST(CronParse, RebootAndUnknownMacrosAreRefused)
{
    EXPECT_REFUSED("@reboot", "\"@reboot\" is refused", "not when the server starts", "@daily");
    EXPECT_REFUSED("@REBOOT", "\"@reboot\" is refused");
    EXPECT_REFUSED("@every", "unknown macro \"@every\"",
                   "@yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly");
    EXPECT_REFUSED("@", "unknown macro \"@\"");
    EXPECT_REFUSED("@daily 5", "a macro stands alone");
    EXPECT_REFUSED("@daily *", "\"@daily *\"", "a macro stands alone");
    EXPECT_REFUSED("@yearly * * * *", "a macro stands alone");
}

TEST(CronParse, EverySecondsOutsideOneToFiftyNineIsRefused)
{
    EXPECT_REFUSED("0 seconds", "\"0 seconds\"", "whole number N from 1 to 59", "*/5 * * * *");
    EXPECT_REFUSED("60 seconds", "\"60 seconds\"", "from 1 to 59");
    EXPECT_REFUSED("90 second", "from 1 to 59");
    EXPECT_REFUSED("-1 seconds", "from 1 to 59");
    EXPECT_REFUSED("1.5 seconds", "from 1 to 59");
    EXPECT_REFUSED("x seconds", "from 1 to 59");
    EXPECT_REFUSED("99999999999999999999999 seconds", "from 1 to 59");
    EXPECT_REFUSED("5 seconds later", "got 3 fields");
}

TEST(CronParse, MessagesStayOnOneLineAndShort)
{
    const std::string long_field(500, '9');
    std::string message = refusal(long_field + " * * * *");
    EXPECT_LT(message.size(), 300u) << message;
    message = refusal("a\x01"
                      "b * * * *");
    EXPECT_NE(message.find("\"a b\""), std::string::npos) << message;
    message = refusal(std::string(300, 'x'));
    EXPECT_NE(message.find("...\""), std::string::npos) << message;
    EXPECT_LT(message.size(), 300u);
    // A cut never splits a UTF-8 character.
    std::string accents = "a";  // so that the 64th byte is inside a character
    for (int i = 0; i < 100; ++i)
        accents += "\xc3\xa9";
    message = refusal(accents);
    const std::size_t end = message.find("...\"");
    ASSERT_NE(end, std::string::npos);
    EXPECT_NE(static_cast<unsigned char>(message[end - 1]), 0xc3u);
}

TEST(CronParse, ParseIntoFillsABufferWithoutOwningMemory)
{
    Spec spec;
    char error[128] = "untouched";
    EXPECT_TRUE(parse_into("*/15 2 * * *", &spec, error, sizeof error));
    EXPECT_STREQ(error, "");
    EXPECT_EQ(spec.minutes, bits({0, 15, 30, 45}));
    EXPECT_FALSE(spec.fixed_time);

    Spec untouched = parse("1 2 3 4 5").spec;
    Spec kept = untouched;
    EXPECT_FALSE(parse_into("61 * * * *", &kept, error, sizeof error));
    EXPECT_TRUE(same(kept, untouched));  // *spec is left alone on refusal
    EXPECT_NE(std::string(error).find("minute field \"61\""), std::string::npos) << error;

    char small[10];
    EXPECT_FALSE(parse_into("61 * * * *", &kept, small, sizeof small));
    EXPECT_EQ(std::string(small), "minute fi");
    EXPECT_FALSE(parse_into("61 * * * *", &kept, nullptr, 0));
    EXPECT_TRUE(parse_into("@daily", &kept, nullptr, 0));
}

TEST(CronParse, RefusalLeavesAnEmptySpec)
{
    const ParseResult r = parse("61 * * * *");
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(same(r.spec, Spec{}));
}
