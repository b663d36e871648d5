#include "server/core/dense_rank_map.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::core {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(DenseRankMapTest, BehavesAsAMapOfTheRanksInserted) {
  DenseRankMap<std::string> map;
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.find(0), map.end());
  EXPECT_FALSE(map.contains(1u << 30));  // far beyond the table: absent, nothing grows
  map[7] = "seven";
  map[2] = "two";
  EXPECT_EQ(map.size(), 2u);
  EXPECT_TRUE(map.contains(7));
  EXPECT_FALSE(map.contains(3));  // inside the table, never inserted
  auto it = map.find(2);
  ASSERT_NE(it, map.end());
  EXPECT_EQ(it->first, 2u);
  EXPECT_EQ(it->second, "two");
  it->second = "deux";
  EXPECT_EQ(map[2], "deux");  // present: not inserted again
  EXPECT_EQ(map.size(), 2u);
  EXPECT_EQ(map[4], "");  // absent: inserted value-initialized
  EXPECT_EQ(map.size(), 3u);
  std::vector<std::pair<RankId, std::string>> seen;
  const DenseRankMap<std::string>& read = map;
  for (const auto& [rank, value] : read) seen.emplace_back(rank, value);
  EXPECT_THAT(seen, ElementsAre(Pair(2, "deux"), Pair(4, ""), Pair(7, "seven")));
  EXPECT_EQ(read.find(5), read.end());
  map.clear();
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.begin(), map.end());
  EXPECT_FALSE(map.contains(7));
}

}  // namespace
}  // namespace psync::core
