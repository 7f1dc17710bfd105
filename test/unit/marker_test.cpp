// Tests of the batch marker text: format_marker / parse_marker.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

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

// 1.3's marker: "2;<number>;<digest>;<ids>;<writer>", the writer last (it may hold any character).
TEST(Marker, ValueRoundTrip)
{
    std::int64_t ids[] = {4, 9};
    double staged[] = {1700000000.123456, 1700000001.5};
    std::uint64_t digest = jobbuf::redis::marker_digest(ids, staged, 2);
    std::string text = jobbuf::redis::format_marker_value(42, digest, {4, 9}, "host h port 5432 data directory /a;b start x");
    jobbuf::redis::MarkerValue value;
    ASSERT_TRUE(jobbuf::redis::parse_marker_value(text, &value)) << text;
    EXPECT_FALSE(value.legacy);
    EXPECT_EQ(value.number, 42);
    EXPECT_EQ(value.digest, digest);
    EXPECT_EQ(value.ids, (std::vector<std::int64_t>{4, 9}));
    EXPECT_EQ(value.writer, "host h port 5432 data directory /a;b start x");
    ASSERT_TRUE(jobbuf::redis::parse_marker_value("3,5", &value));
    EXPECT_TRUE(value.legacy);
    EXPECT_EQ(value.ids, (std::vector<std::int64_t>{3, 5}));
    for (const char* bad : {"2;", "2;x;0000000000000000;;w", "2;1;00;;w", "2;1;0000000000000000;1,;w", "2;1;0000000000000000"})
        EXPECT_FALSE(jobbuf::redis::parse_marker_value(bad, &value)) << bad;
}

// The digest tells jobs staged at another microsecond (a copy's own job under the same id) apart,
// and not the last bit of two conversions of one timestamp to epoch seconds.
TEST(Marker, DigestCoversIdsAndStagedAtToTheMicrosecond)
{
    std::int64_t ids[] = {10};
    double a[] = {1700000000.000001};
    double b[] = {1700000000.000001 + 1e-9};
    double c[] = {1700000000.000002};
    std::int64_t other[] = {11};
    EXPECT_EQ(jobbuf::redis::marker_digest(ids, a, 1), jobbuf::redis::marker_digest(ids, b, 1));
    EXPECT_NE(jobbuf::redis::marker_digest(ids, a, 1), jobbuf::redis::marker_digest(ids, c, 1));
    EXPECT_NE(jobbuf::redis::marker_digest(ids, a, 1), jobbuf::redis::marker_digest(other, a, 1));
}

// A fair_by batch names its jobs partition by partition; a later start reads them in id order.
TEST(Marker, DigestIgnoresTheOrder)
{
    std::int64_t ids[] = {10, 3, 7};
    double staged[] = {1700000000.5, 1700000001.25, 1700000002.0};
    std::int64_t sorted_ids[] = {3, 7, 10};
    double sorted_staged[] = {1700000001.25, 1700000002.0, 1700000000.5};
    std::int64_t fewer[] = {3, 7};
    EXPECT_EQ(jobbuf::redis::marker_digest(ids, staged, 3), jobbuf::redis::marker_digest(sorted_ids, sorted_staged, 3));
    EXPECT_NE(jobbuf::redis::marker_digest(ids, staged, 3), jobbuf::redis::marker_digest(fewer, sorted_staged, 2));
}
