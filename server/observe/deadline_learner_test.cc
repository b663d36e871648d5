#include "server/observe/deadline_learner.h"

#include "gtest/gtest.h"

namespace psync::observe {
namespace {

DeadlineOptions Options() {
  DeadlineOptions o;
  o.window = 10;
  o.percentile = 0.9;
  o.multiplier = 2.0;
  o.floor = absl::Milliseconds(5);
  o.ceiling = absl::Seconds(1);
  o.initial = absl::Milliseconds(700);
  o.min_samples = 4;
  return o;
}

TEST(DeadlineLearnerTest, InitialUntilEnoughSamples) {
  DeadlineLearner learner(Options());
  EXPECT_EQ(learner.Deadline(0), absl::Milliseconds(700));
  for (int i = 0; i < 3; ++i) learner.Observe(0, absl::Milliseconds(10));
  EXPECT_EQ(learner.Deadline(0), absl::Milliseconds(700));
  learner.Observe(0, absl::Milliseconds(10));
  EXPECT_EQ(learner.Deadline(0), absl::Milliseconds(20));  // 2 x p90 of {10,10,10,10}
}

TEST(DeadlineLearnerTest, MultiplierTimesNearestRankPercentile) {
  DeadlineLearner learner(Options());
  // Waits 1..10 ms: the nearest-rank p90 of 10 samples is the 9th smallest, 9 ms.
  for (int i = 10; i >= 1; --i) learner.Observe(3, absl::Milliseconds(i));
  EXPECT_EQ(learner.Deadline(3), absl::Milliseconds(18));
  EXPECT_EQ(learner.Deadline(4), absl::Milliseconds(700)) << "chunks learn separately";
}

TEST(DeadlineLearnerTest, WindowForgetsOldWaits) {
  DeadlineLearner learner(Options());
  for (int i = 0; i < 10; ++i) learner.Observe(0, absl::Milliseconds(400));
  EXPECT_EQ(learner.Deadline(0), absl::Milliseconds(800));
  for (int i = 0; i < 10; ++i) learner.Observe(0, absl::Milliseconds(4));
  EXPECT_EQ(learner.Deadline(0), absl::Milliseconds(8));
}

TEST(DeadlineLearnerTest, ClampedToFloorAndCeiling) {
  DeadlineLearner learner(Options());
  for (int i = 0; i < 10; ++i) learner.Observe(0, absl::Microseconds(100));
  EXPECT_EQ(learner.Deadline(0), absl::Milliseconds(5));
  for (int i = 0; i < 10; ++i) learner.Observe(1, absl::Seconds(5));
  EXPECT_EQ(learner.Deadline(1), absl::Seconds(1));
}

}  // namespace
}  // namespace psync::observe
