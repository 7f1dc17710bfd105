// Tests of the batch marker text: format_marker / parse_marker.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "redis/delivery.h"

using jobbuf::redis::format_marker;
using jobbuf::redis::parse_marker;

TEST(Marker, Format)
{
    EXPECT_EQ(format_marker({}), "");
    EXPECT_EQ(format_marker({7}), "7");
    EXPECT_EQ(format_marker({1, 2, 30, 9223372036854775807LL}), "1,2,30,9223372036854775807");
}

TEST(Marker, RoundTrip)
{
    std::vector<std::int64_t> ids = {1, 5, 6, 1000000000000LL, std::numeric_limits<std::int64_t>::max()};
    std::vector<std::int64_t> back = {99};
    ASSERT_TRUE(parse_marker(format_marker(ids), &back));
    EXPECT_EQ(back, ids);
}

TEST(Marker, EmptyParsesToNoIds)
{
    std::vector<std::int64_t> ids = {3};
    ASSERT_TRUE(parse_marker("", &ids));
    EXPECT_TRUE(ids.empty());
}

TEST(Marker, RejectsMalformed)
{
    for (const char* bad : {",", "1,", ",1", "1,,2", "1, 2", " 1", "1 ", "a", "1,b", "-1", "+1", "1.5",
                            "9223372036854775808", "99999999999999999999", "1;2", "0x10"}) {
        std::vector<std::int64_t> ids;
        EXPECT_FALSE(parse_marker(bad, &ids)) << bad;
    }
}
