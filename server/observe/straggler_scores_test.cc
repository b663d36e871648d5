#include "server/observe/straggler_scores.h"

#include "gtest/gtest.h"

namespace psync::observe {
namespace {

// A check-in time `ms` milliseconds after the epoch, in Unix nanoseconds.
int64_t At(int ms) { return int64_t{ms} * 1000000; }

// alpha is 0.25 in these tests, not 0.5, so that the newest sample's weight (alpha) and the
// history's (1 - alpha) differ: a score with the weights swapped fails them.
constexpr double kAlpha = 0.25;

// One rank's score, every field.
void ExpectScore(const StragglerScore& s, core::RankId rank, double score_seconds,
                 double last_seconds, uint64_t samples, uint64_t times_last) {
  EXPECT_EQ(s.rank, rank);
  EXPECT_DOUBLE_EQ(s.score_seconds, score_seconds) << "rank " << rank;
  EXPECT_DOUBLE_EQ(s.last_seconds, last_seconds) << "rank " << rank;
  EXPECT_EQ(s.samples, samples) << "rank " << rank;
  EXPECT_EQ(s.times_last, times_last) << "rank " << rank;
}

TEST(StragglerScoresTest, LatenessIsTimeAfterTheFirstCheckin) {
  StragglerScores scores(kAlpha);
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
  StragglerScores scores(kAlpha);
  scores.OnRelease({{0, At(0)}, {1, At(40)}});
  // Rank 1 has two optimizers: its later check-in (20 ms) counts.
  scores.OnRelease({{0, At(1000)}, {1, At(1010)}, {1, At(1020)}});
  auto top = scores.Top(1);
  ASSERT_EQ(top.size(), 1u);
  // 0.25 * newest (20 ms) + 0.75 * previous (40 ms) = 35 ms; swapped weights would give 25 ms.
  ExpectScore(top[0], 1, 0.035, 0.020, 2, 2);
}

// A rank's later check-in counts wherever it comes in the release's list, and wherever a later
// release's check-in of the rank comes beside it.
TEST(StragglerScoresTest, TheLaterCheckinCountsWhereverItIsListed) {
  StragglerScores scores(kAlpha);
  scores.OnRelease({{1, At(40)}, {0, At(0)}, {1, At(10)}});
  scores.OnRelease({{1, At(1020)}, {0, At(1000)}, {1, At(1010)}, {0, At(1005)}});
  const auto all = scores.ByRank();
  ASSERT_EQ(all.size(), 2u);
  // Rank 1: 40 ms, then 0.25 * 20 + 0.75 * 40 = 35 ms; taking the 10 ms check-ins would give 10 and
  // 17.5 ms.
  ExpectScore(all[1], 1, 0.035, 0.020, 2, 2);
  // Rank 0: 0, then 0.25 * 5 + 0.75 * 0 = 1.25 ms, never the last.
  ExpectScore(all[0], 0, 0.00125, 0.005, 2, 0);
}

// Three samples with the default alpha (0.1): each new score is 0.1 * newest + 0.9 * the score
// before it, so the oldest sample still dominates.
TEST(StragglerScoresTest, DefaultAlphaWeighsTheNewestSampleATenth) {
  StragglerScores scores;
  scores.OnRelease({{0, At(0)}, {1, At(100)}});
  scores.OnRelease({{0, At(1000)}, {1, At(1000)}});
  scores.OnRelease({{0, At(2000)}, {1, At(2010)}});
  const auto all = scores.All();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].rank, 1u);
  // 100 ms; then 0.1 * 0 + 0.9 * 100 = 90 ms; then 0.1 * 10 + 0.9 * 90 = 82 ms.
  EXPECT_NEAR(all[0].score_seconds, 0.082, 1e-12);
  EXPECT_DOUBLE_EQ(all[0].last_seconds, 0.010);
  EXPECT_EQ(all[0].samples, 3u);
  EXPECT_EQ(all[0].times_last, 2u);
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
  StragglerScores scores(kAlpha);
  scores.OnRelease({{1000, At(0)}, {7, At(30)}});
  scores.OnRelease({{7, At(100)}, {7, At(150)}, {1000, At(120)}});
  auto all = scores.All();
  ASSERT_EQ(all.size(), 2u);
  // 0.25 * 50 ms + 0.75 * 30 ms = 35 ms (swapped: 45 ms).
  ExpectScore(all[0], 7, 0.035, 0.050, 2, 2);
  // 0.25 * 20 ms + 0.75 * 0 ms = 5 ms (swapped: 15 ms).
  ExpectScore(all[1], 1000, 0.005, 0.020, 2, 0);
}

}  // namespace
}  // namespace psync::observe
