// RankTable: a value per rank, in pages of 16 consecutive ranks; a page goes with its last value.
#include "serve/rank_table.h"

#include <memory>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::serve {
namespace {

using ::testing::UnorderedElementsAre;

std::vector<std::pair<uint32_t, int>> All(const RankTable<int>& table) {
  std::vector<std::pair<uint32_t, int>> all;
  table.ForEach([&](uint32_t rank, int value) { all.emplace_back(rank, value); });
  return all;
}

TEST(RankTableTest, FindsEachRankOnItsOwnAcrossAndWithinPages) {
  RankTable<int> table;
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.Find(0), nullptr);
  // 15 and 16 sit at the end of one page and the start of the next; 0 shares 15's page.
  table[15] = 150;
  table[16] = 160;
  table[0] = 1;
  table[1048575] = 7;  // a world of 2^20 ranks: its last
  EXPECT_EQ(table.size(), 4u);
  ASSERT_NE(table.Find(15), nullptr);
  EXPECT_EQ(*table.Find(15), 150);
  ASSERT_NE(table.Find(16), nullptr);
  EXPECT_EQ(*table.Find(16), 160);
  EXPECT_EQ(table.Find(14), nullptr);  // in a page that holds values, but never set
  EXPECT_EQ(table.Find(17), nullptr);
  EXPECT_EQ(table.Find(32), nullptr);  // in no page
  table[16] = 161;                     // replaced, not added
  EXPECT_EQ(table.size(), 4u);
  EXPECT_THAT(All(table),
              UnorderedElementsAre(std::make_pair(0u, 1), std::make_pair(15u, 150),
                                   std::make_pair(16u, 161), std::make_pair(1048575u, 7)));
}

TEST(RankTableTest, AValueMadeByIndexingStartsValueInitialized) {
  RankTable<int> table;
  table[2] = 20;  // keeps the page of 0-15 while 3 comes and goes
  table[3] = 30;
  ASSERT_TRUE(table.erase(3));
  EXPECT_EQ(table[3], 0);  // made again: value-initialized, not the 30 erased
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(*table.Find(2), 20);
}

TEST(RankTableTest, EraseReleasesTheValueAndTheEmptiedPage) {
  RankTable<std::shared_ptr<int>> table;
  auto owned = std::make_shared<int>(5);
  table[40] = owned;
  table[41] = std::make_shared<int>(6);
  EXPECT_EQ(owned.use_count(), 2);
  EXPECT_FALSE(table.erase(42));  // absent in a present page
  EXPECT_FALSE(table.erase(7));   // absent page
  EXPECT_TRUE(table.erase(40));
  EXPECT_EQ(owned.use_count(), 1);  // the table no longer holds it
  EXPECT_EQ(table.Find(40), nullptr);
  ASSERT_NE(table.Find(41), nullptr);
  EXPECT_EQ(**table.Find(41), 6);
  EXPECT_FALSE(table.erase(40));  // twice: nothing left to erase
  EXPECT_TRUE(table.erase(41));
  EXPECT_TRUE(table.empty());
  int visited = 0;
  table.ForEach([&](uint32_t, const std::shared_ptr<int>&) { ++visited; });
  EXPECT_EQ(visited, 0);  // the page went with its last value
}

TEST(RankTableTest, ManyScatteredRanksAllFoundAndCounted) {
  RankTable<uint64_t> table;
  // Nodes of 8 ranks dealt to 16 relays round-robin: this table holds every 16th node's ranks.
  for (uint32_t node = 3; node < 2048; node += 16) {
    for (uint32_t r = node * 8; r < node * 8 + 8; ++r) table[r] = uint64_t{r} * 3;
  }
  EXPECT_EQ(table.size(), 128u * 8);
  for (uint32_t r = 0; r < 2048 * 8; ++r) {
    const bool mine = (r / 8) % 16 == 3;
    const uint64_t* value = table.Find(r);
    ASSERT_EQ(value != nullptr, mine) << r;
    if (mine) {
      EXPECT_EQ(*value, uint64_t{r} * 3) << r;
    }
  }
}

}  // namespace
}  // namespace psync::serve
