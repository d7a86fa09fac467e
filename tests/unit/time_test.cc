#include "core/time.h"

#include <gtest/gtest.h>

namespace faultline {
namespace {

TEST(Time, FormatsRfc3339WithNanoseconds) {
  EXPECT_EQ(formatRfc3339(0), "1970-01-01T00:00:00.000000000Z");
  EXPECT_EQ(formatRfc3339(civilToNanos(2025, 2, 23, 16, 24, 18, 123456789)),
            "2025-02-23T16:24:18.123456789Z");
  EXPECT_EQ(formatRfc3339(-1), "1969-12-31T23:59:59.999999999Z");
}

TEST(Time, ParsesRfc3339Forms) {
  int64_t ns = 0;
  size_t used = 0;
  ASSERT_TRUE(parseRfc3339("2025-01-21T04:41:44,283302+00:00 NVRM", &ns, &used));
  EXPECT_EQ(ns, civilToNanos(2025, 1, 21, 4, 41, 44, 283302000));
  EXPECT_EQ(used, 32U);
  ASSERT_TRUE(parseRfc3339("2024-02-14T05:03:41+0100", &ns));
  EXPECT_EQ(ns, civilToNanos(2024, 2, 14, 4, 3, 41));
  ASSERT_TRUE(parseRfc3339("2024-02-14T05:03:41.5Z", &ns));
  EXPECT_EQ(ns, civilToNanos(2024, 2, 14, 5, 3, 41, 500000000));
  EXPECT_FALSE(parseRfc3339("2024-13-14T05:03:41Z", &ns));
  EXPECT_FALSE(parseRfc3339("Feb 14 05:03:41", &ns));
  // RFC 3339 5.6: 't' and 'z' may be lower case.
  ASSERT_TRUE(parseRfc3339("2025-03-03t11:07:06z", &ns));
  EXPECT_EQ(ns, civilToNanos(2025, 3, 3, 11, 7, 6));
}

TEST(Time, Rfc3339WithoutConsumedIsTheWholeText) {
  // An offset after a space is no part of the stamp: read alone, it would pass for UTC.
  int64_t ns = 7;
  EXPECT_FALSE(parseRfc3339("2025-02-23 16:24:18 +05:00", &ns));
  EXPECT_FALSE(parseRfc3339("2025-02-23T16:24:18Zjunk", &ns));
  EXPECT_EQ(ns, 7);  // unchanged on failure
  size_t used = 0;
  ASSERT_TRUE(parseRfc3339("2025-02-23 16:24:18 +05:00", &ns, &used));
  EXPECT_EQ(used, 19U);
}

TEST(Time, Rfc3339RefusesDatesAndOffsetsThatDoNotExist) {
  int64_t ns = 0;
  EXPECT_FALSE(parseRfc3339("2024-04-31T00:00:00Z", &ns));
  EXPECT_FALSE(parseRfc3339("2025-02-29T00:00:00Z", &ns));
  EXPECT_FALSE(parseRfc3339("2024-02-30T00:00:00Z", &ns));
  ASSERT_TRUE(parseRfc3339("2024-02-29T00:00:00Z", &ns));
  EXPECT_EQ(ns, civilToNanos(2024, 2, 29, 0, 0, 0));
  EXPECT_FALSE(parseRfc3339("2024-02-14T05:03:41+24:00", &ns));
  EXPECT_FALSE(parseRfc3339("2024-02-14T05:03:41-2400", &ns));
  EXPECT_FALSE(parseRfc3339("2024-02-14T05:03:41+23:60", &ns));
  ASSERT_TRUE(parseRfc3339("2024-02-14T05:03:41-23:59", &ns));
  EXPECT_EQ(ns, civilToNanos(2024, 2, 15, 5, 2, 41));
}

TEST(Time, ValidCivilDates) {
  EXPECT_TRUE(isValidCivil(2000, 2, 29, 0, 0, 0));   // divisible by 400
  EXPECT_FALSE(isValidCivil(2100, 2, 29, 0, 0, 0));  // by 100 only
  EXPECT_TRUE(isValidCivil(2025, 12, 31, 23, 59, 60));
  EXPECT_FALSE(isValidCivil(2025, 11, 31, 0, 0, 0));
  EXPECT_FALSE(isValidCivil(2025, 13, 1, 0, 0, 0));
  EXPECT_FALSE(isValidCivil(2025, 1, 0, 0, 0, 0));
}

TEST(Time, ParsesDurations) {
  int64_t ns = 0;
  ASSERT_TRUE(parseDuration("1h30m", &ns));
  EXPECT_EQ(ns, 5400 * kNanosPerSecond);
  ASSERT_TRUE(parseDuration("500ms", &ns));
  EXPECT_EQ(ns, kNanosPerSecond / 2);
  ns = 1;
  ASSERT_TRUE(parseDuration("0", &ns));  // the zero duration needs no unit
  EXPECT_EQ(ns, 0);
  EXPECT_FALSE(parseDuration("00", &ns));
  EXPECT_FALSE(parseDuration("10", &ns));
  EXPECT_FALSE(parseDuration("5x", &ns));
  EXPECT_FALSE(parseDuration("", &ns));
}

}  // namespace
}  // namespace faultline
