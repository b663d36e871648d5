// JobRankMap: a value per (job, rank), found by job then rank; a job's entry goes with its last
// rank.
#include "serve/job_rank_map.h"

#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::serve {
namespace {

using ::testing::UnorderedElementsAre;

std::vector<std::tuple<std::string, uint32_t, int>> All(const JobRankMap<int>& map) {
  std::vector<std::tuple<std::string, uint32_t, int>> all;
  map.ForEach([&](const std::string& job, uint32_t rank, int value) {
    all.emplace_back(job, rank, value);
  });
  return all;
}

TEST(JobRankMapTest, ValuesByJobThenRank) {
  JobRankMap<int> map;
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.RanksOf("a"), nullptr);
  EXPECT_EQ(map.Find("a", 0), nullptr);
  map("a", 0) = 10;
  map("a", 1) = 11;
  map("b", 0) = 20;
  map("a", 1) = 12;  // replaced
  ASSERT_NE(map.Find("a", 1), nullptr);
  EXPECT_EQ(*map.Find("a", 1), 12);
  EXPECT_EQ(map.Find("b", 1), nullptr);
  EXPECT_EQ(map.Find("c", 0), nullptr);
  ASSERT_NE(map.RanksOf("a"), nullptr);
  EXPECT_EQ(map.RanksOf("a")->size(), 2u);
  EXPECT_THAT(All(map),
              UnorderedElementsAre(std::make_tuple("a", 0u, 10), std::make_tuple("a", 1u, 12),
                                   std::make_tuple("b", 0u, 20)));
}

TEST(JobRankMapTest, EraseIfOnlyWhereThePredicateHoldsAndTheJobGoesWithItsLastRank) {
  JobRankMap<int> map;
  map("a", 0) = 10;
  map("a", 1) = 11;
  const auto is = [](int v) { return [v](int value) { return value == v; }; };
  EXPECT_FALSE(map.EraseIf("a", 0, is(99)));  // another value (a newer attach): kept
  EXPECT_FALSE(map.EraseIf("a", 7, is(10)));
  EXPECT_FALSE(map.EraseIf("z", 0, is(10)));
  EXPECT_TRUE(map.EraseIf("a", 0, is(10)));
  EXPECT_EQ(map.Find("a", 0), nullptr);
  ASSERT_NE(map.RanksOf("a"), nullptr);
  EXPECT_TRUE(map.EraseIf("a", 1, is(11)));
  EXPECT_EQ(map.RanksOf("a"), nullptr);
  EXPECT_TRUE(map.empty());
}

TEST(JobRankMapTest, SwapTakesEverything) {
  JobRankMap<int> map;
  map("a", 3) = 1;
  JobRankMap<int> taken;
  taken.swap(map);
  EXPECT_TRUE(map.empty());
  EXPECT_THAT(All(taken), UnorderedElementsAre(std::make_tuple("a", 3u, 1)));
}

}  // namespace
}  // namespace psync::serve
