#include "server/observe/straggler_scores.h"

#include "gtest/gtest.h"

namespace psync::observe {
namespace {

absl::Time At(int ms) { return absl::UnixEpoch() + absl::Milliseconds(ms); }

TEST(StragglerScoresTest, LatenessIsTimeAfterTheFirstCheckin) {
  StragglerScores scores(0.5);
  scores.OnRelease({{0, At(100)}, {1, At(130)}, {2, At(110)}});
  auto top = scores.Top(3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].rank, 1u);
  EXPECT_DOUBLE_EQ(top[0].score_seconds, 0.030);
  EXPECT_EQ(top[0].times_last, 1u);
  EXPECT_EQ(top[1].rank, 2u);
  EXPECT_DOUBLE_EQ(top[1].score_seconds, 0.010);
  EXPECT_EQ(top[2].rank, 0u);
  EXPECT_DOUBLE_EQ(top[2].score_seconds, 0.0);
}

TEST(StragglerScoresTest, MovingAverageAndLaterCheckinOfARankCounts) {
  StragglerScores scores(0.5);
  scores.OnRelease({{0, At(0)}, {1, At(40)}});
  // Rank 1 has two optimizers: its later check-in (20 ms) counts.
  scores.OnRelease({{0, At(1000)}, {1, At(1010)}, {1, At(1020)}});
  auto top = scores.Top(1);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].rank, 1u);
  EXPECT_DOUBLE_EQ(top[0].score_seconds, 0.5 * 0.020 + 0.5 * 0.040);
  EXPECT_DOUBLE_EQ(top[0].last_seconds, 0.020);
  EXPECT_EQ(top[0].samples, 2u);
  EXPECT_EQ(top[0].times_last, 2u);
}

TEST(StragglerScoresTest, TiesOrderByRankAndTopTruncates) {
  StragglerScores scores;
  scores.OnRelease({{5, At(0)}, {3, At(0)}, {4, At(0)}});
  auto top = scores.Top(2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].rank, 3u);
  EXPECT_EQ(top[1].rank, 4u);
  EXPECT_EQ(top[0].times_last, 0u) << "a tie is nobody's fault";
}

TEST(StragglerScoresTest, OnlyRanksThatContributedHaveScores) {
  StragglerScores scores(0.5);
  scores.OnRelease({{1000, At(0)}, {7, At(30)}});
  scores.OnRelease({{7, At(100)}, {7, At(150)}, {1000, At(120)}});
  auto all = scores.All();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].rank, 7u);
  EXPECT_DOUBLE_EQ(all[0].score_seconds, 0.5 * 0.030 + 0.5 * 0.050);
  EXPECT_EQ(all[0].samples, 2u);
  EXPECT_EQ(all[0].times_last, 2u);
  EXPECT_EQ(all[1].rank, 1000u);
  EXPECT_DOUBLE_EQ(all[1].score_seconds, 0.5 * 0.0 + 0.5 * 0.020);
  EXPECT_DOUBLE_EQ(all[1].last_seconds, 0.020);
  EXPECT_EQ(all[1].samples, 2u);
  EXPECT_EQ(all[1].times_last, 0u);
}

}  // namespace
}  // namespace psync::observe
