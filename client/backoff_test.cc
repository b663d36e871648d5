#include "client/backoff.h"

#include <vector>

#include "gtest/gtest.h"

namespace psync {
namespace {

// u = 0.5 maps to a jitter factor of exactly 1.
double Middle() { return 0.5; }

TEST(BackoffTest, DefaultScheduleDoublesFrom50msUpTo2s) {
  Backoff backoff(BackoffOptions{}, Middle);
  const std::vector<int> expected_ms = {50, 100, 200, 400, 800, 1600, 2000, 2000, 2000};
  for (int ms : expected_ms) EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(ms));
}

TEST(BackoffTest, JitterSpreadsByTwentyPercent) {
  Backoff low(BackoffOptions{}, [] { return 0.0; });
  EXPECT_EQ(low.NextDelay(), absl::Milliseconds(40));
  EXPECT_EQ(low.NextDelay(), absl::Milliseconds(80));
  Backoff high(BackoffOptions{}, [] { return 0.75; });
  EXPECT_EQ(high.NextDelay(), absl::Milliseconds(55));
  // The cap applies before the jitter.
  for (int i = 0; i < 10; ++i) high.NextDelay();
  EXPECT_EQ(high.NextDelay(), absl::Milliseconds(2200));
}

TEST(BackoffTest, RandomDelaysStayInRange) {
  Backoff backoff(BackoffOptions{});
  for (int i = 0; i < 200; ++i) {
    const absl::Duration d = backoff.NextDelay();
    EXPECT_GE(d, absl::Milliseconds(40));
    EXPECT_LE(d, absl::Milliseconds(2400));
  }
}

TEST(BackoffTest, ResetStartsAgain) {
  Backoff backoff(BackoffOptions{}, Middle);
  backoff.NextDelay();
  backoff.NextDelay();
  EXPECT_EQ(backoff.attempt(), 2);
  backoff.Reset();
  EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(50));
}

TEST(BackoffTest, CustomOptions) {
  BackoffOptions options;
  options.initial = absl::Milliseconds(10);
  options.max = absl::Milliseconds(100);
  options.multiplier = 3;
  options.jitter = 0;
  Backoff backoff(options, Middle);
  EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(10));
  EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(30));
  EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(90));
  EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(100));
}

TEST(BackoffTest, ValidateNamesTheField) {
  EXPECT_TRUE(ValidateBackoffOptions(BackoffOptions{}).ok());
  BackoffOptions bad;
  bad.initial = absl::ZeroDuration();
  EXPECT_EQ(ValidateBackoffOptions(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ValidateBackoffOptions(bad).message().find("backoff.initial"), std::string::npos);
  bad = BackoffOptions{};
  bad.max = absl::Milliseconds(1);
  EXPECT_NE(ValidateBackoffOptions(bad).message().find("backoff.max"), std::string::npos);
  bad = BackoffOptions{};
  bad.multiplier = 0.5;
  EXPECT_NE(ValidateBackoffOptions(bad).message().find("backoff.multiplier"), std::string::npos);
  bad = BackoffOptions{};
  bad.jitter = 1.0;
  EXPECT_NE(ValidateBackoffOptions(bad).message().find("backoff.jitter"), std::string::npos);
}

}  // namespace
}  // namespace psync
