#include "serve/metrics/exposition.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace psync::metrics {
namespace {

TEST(NameTest, MetricNames) {
  for (const char* good :
       {"a", "_a", ":a", "psync_checkins_total", "job:psync_missing:sum", "A9_b"}) {
    EXPECT_TRUE(IsValidMetricName(good)) << good;
  }
  for (const char* bad : {"", "9a", "a-b", "a b", "a.b", "é", "a\n"}) {
    EXPECT_FALSE(IsValidMetricName(bad)) << bad;
  }
}

TEST(NameTest, LabelNames) {
  for (const char* good : {"a", "_a", "job", "chunk_id", "A9", "__reserved"}) {
    EXPECT_TRUE(IsValidLabelName(good)) << good;
  }
  for (const char* bad : {"", "9a", "a:b", "a-b", "a b"}) {
    EXPECT_FALSE(IsValidLabelName(bad)) << bad;
  }
}

TEST(EscapeTest, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(EscapeLabelValue("tab\tstays"), "tab\tstays");
  EXPECT_EQ(EscapeLabelValue(""), "");
}

TEST(EscapeTest, HelpEscapesBackslashAndNewlineOnly) {
  EXPECT_EQ(EscapeHelp("a\\b \"quoted\"\nnext"), "a\\\\b \"quoted\"\\nnext");
}

TEST(FormatValueTest, ShortestRoundTrip) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(FormatValue(-42), "-42");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(0.005), "0.005");
  EXPECT_EQ(FormatValue(2.5), "2.5");
  EXPECT_EQ(FormatValue(1e21), "1e+21");
  EXPECT_EQ(FormatValue(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(FormatValue(123456789012345.0), "123456789012345");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  for (double value : {0.1, 1.0 / 3, 1e-300, 6.02214076e23, 0.3 - 0.1}) {
    EXPECT_EQ(std::stod(FormatValue(value)), value) << FormatValue(value);
  }
}

TEST(AppendLabelsTest, RendersEscapedPairsOrNothing) {
  std::string out;
  AppendLabels({}, {}, &out);
  EXPECT_EQ(out, "");
  AppendLabels({"job", "chunk"}, {"a\"b", "3"}, &out);
  EXPECT_EQ(out, "{job=\"a\\\"b\",chunk=\"3\"}");
}

}  // namespace
}  // namespace psync::metrics
