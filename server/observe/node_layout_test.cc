#include "server/observe/node_layout.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::observe {
namespace {

using ::testing::ElementsAre;

TEST(NodeLayoutTest, UnnamedRanksGoInBlocksNamedByTheirRanks) {
  const NodeLayout layout = LayOutNodes(10, 4, [](core::RankId) { return absl::string_view(); });
  EXPECT_THAT(layout.names, ElementsAre("ranks 0-3", "ranks 4-7", "ranks 8-9"));
  EXPECT_THAT(layout.node_of_rank, ElementsAre(0, 0, 0, 0, 1, 1, 1, 1, 2, 2));
  EXPECT_EQ(layout.Find("ranks 4-7"), 1);
  EXPECT_EQ(layout.Find("node-1"), -1);
}

TEST(NodeLayoutTest, NamedRanksGroupByNameInOrderOfTheirLowestRank) {
  // Ranks 0 and 3 on "b", 1 and 2 on "a", 4 unnamed, 5 on "b" again.
  const std::vector<std::string> names = {"b", "a", "a", "b", "", "b"};
  const NodeLayout layout =
      LayOutNodes(6, 8, [&](core::RankId r) { return absl::string_view(names[r]); });
  EXPECT_THAT(layout.names, ElementsAre("b", "a", "ranks 0-5"));
  EXPECT_THAT(layout.node_of_rank, ElementsAre(0, 1, 1, 0, 2, 0));
}

TEST(NodeLayoutTest, NodeSizeZeroCountsAsOne) {
  const NodeLayout layout = LayOutNodes(2, 0, [](core::RankId) { return absl::string_view(); });
  EXPECT_THAT(layout.names, ElementsAre("ranks 0-0", "ranks 1-1"));
}

}  // namespace
}  // namespace psync::observe
