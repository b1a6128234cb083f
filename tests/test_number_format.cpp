// util/number_format: the one rule for byte sizes (text and chart units) and
// digit groups, at every unit boundary, and the sizes it writes parse back
// with the planner's size parser.
#include "plan/planners.h"
#include "util/number_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace {

using reap::util::decimal_unit;
using reap::util::format_size;
using reap::util::group_digits;

TEST(NumberFormat, DecimalUnitAtEachBoundary) {
    struct row { uint64_t bytes; const char * name; double unit; };
    for (const row & r : {row{0, "B", 1}, row{999, "B", 1}, row{1000, "kB", 1e3}, row{999999, "kB", 1e3},
                          row{1000000, "MB", 1e6}, row{999999999, "MB", 1e6}, row{1000000000, "GB", 1e9},
                          row{999999999999ull, "GB", 1e9}, row{1000000000000ull, "TB", 1e12},
                          row{std::numeric_limits<uint64_t>::max(), "TB", 1e12}}) {
        const reap::util::size_unit u = decimal_unit(r.bytes);
        EXPECT_STREQ(u.name, r.name) << r.bytes;
        EXPECT_EQ(u.bytes, r.unit) << r.bytes;
    }
}

TEST(NumberFormat, SizeTextDecimalThenBinary) {
    EXPECT_EQ(format_size(0), "0 B");
    EXPECT_EQ(format_size(999), "999 B");
    EXPECT_EQ(format_size(1000), "1.00 kB (1000.00 B)");   // not yet a KiB
    EXPECT_EQ(format_size(1024), "1.02 kB (1.00 KiB)");
    EXPECT_EQ(format_size(1500), "1.50 kB (1.46 KiB)");
    EXPECT_EQ(format_size(1000000), "1.00 MB (976.56 KiB)");
    EXPECT_EQ(format_size(1048576), "1.05 MB (1.00 MiB)");
    EXPECT_EQ(format_size(512000000000ull), "512.00 GB (476.84 GiB)");
    EXPECT_EQ(format_size(999999999999ull), "1000.00 GB (931.32 GiB)");   // still GB: the unit is chosen before rounding
    EXPECT_EQ(format_size(1000000000000ull), "1.00 TB (931.32 GiB)");
    EXPECT_EQ(format_size(2000000000000ull), "2.00 TB (1.82 TiB)");
    EXPECT_EQ(format_size(5000000000000000ull), "5000.00 TB (4547.47 TiB)");   // TB is the largest unit
}

TEST(NumberFormat, SizeTextParsesBack) {
    for (uint64_t b : {1500ull, 2500000ull, 277500000000ull, 1950000000000ull}) {
        const std::string text = format_size(b);
        uint64_t dec = 0, bin = 0;
        std::string err;
        ASSERT_TRUE(reap::planner::parse_size(text.substr(0, text.find(" (")), dec, err)) << text << ": " << err;
        const size_t open = text.find('(') + 1;
        ASSERT_TRUE(reap::planner::parse_size(text.substr(open, text.size() - open - 1), bin, err)) << text << ": " << err;
        EXPECT_NEAR((double) dec, (double) b, 0.005 * (double) b) << text;
        EXPECT_NEAR((double) bin, (double) b, 0.005 * (double) b) << text;
    }
}

TEST(NumberFormat, DigitGroups) {
    EXPECT_EQ(group_digits(0), "0");
    EXPECT_EQ(group_digits(999), "999");
    EXPECT_EQ(group_digits(1000), "1,000");
    EXPECT_EQ(group_digits(123456), "123,456");
    EXPECT_EQ(group_digits(1234567), "1,234,567");
    EXPECT_EQ(group_digits(-1234), "-1,234");
    EXPECT_EQ(group_digits(-999), "-999");
    EXPECT_EQ(group_digits(std::numeric_limits<int64_t>::max()), "9,223,372,036,854,775,807");
    EXPECT_EQ(group_digits(std::numeric_limits<int64_t>::min()), "-9,223,372,036,854,775,808");
}

} // namespace
