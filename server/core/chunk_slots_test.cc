// ChunkSlots and RankRuns give each contributor and member its exact position, for dense and sparse
// rank layouts; StagedSet and DoneSet keep marks by slot and anyone the slots do not list by key.
#include "server/core/chunk_slots.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/core/step_state.h"

namespace psync::core {
namespace {

using Positions = std::pair<uint32_t, uint32_t>;

TEST(RankRunsTest, DenseLayoutGivesEachRankItsRun) {
  const std::vector<RankId> ranks = {4, 4, 5, 7, 7, 7};
  const RankRuns runs(ranks);
  EXPECT_EQ(runs.Find(4), Positions(0, 2));
  EXPECT_EQ(runs.Find(5), Positions(2, 3));
  EXPECT_EQ(runs.Find(6), Positions(3, 3));  // inside the span, no position
  EXPECT_EQ(runs.Find(7), Positions(3, 6));
  EXPECT_EQ(runs.Find(3).first, runs.Find(3).second);
  EXPECT_EQ(runs.Find(8).first, runs.Find(8).second);
  EXPECT_EQ(runs.Find(1u << 31).first, runs.Find(1u << 31).second);
}

TEST(RankRunsTest, SparseLayoutGivesTheSameRuns) {
  // Two ranks a million apart: a prefix array would be 4 MB, so the runs are hashed.
  const std::vector<RankId> ranks = {3, 3, 1000003};
  const RankRuns runs(ranks);
  EXPECT_EQ(runs.Find(3), Positions(0, 2));
  EXPECT_EQ(runs.Find(1000003), Positions(2, 3));
  EXPECT_EQ(runs.Find(4).first, runs.Find(4).second);
  EXPECT_EQ(RankRuns().Find(0).first, RankRuns().Find(0).second);
}

ChunkSlots TwoOptimizersOnRanks(std::vector<RankId> ranks, std::vector<RankId> members) {
  absl::btree_set<Contributor> contributors;
  for (RankId r : ranks) {
    contributors.insert({r, "dense"});
    contributors.insert({r, "expert"});
  }
  return ChunkSlots(contributors, members);
}

TEST(ChunkSlotsTest, SlotsFollowContributorOrder) {
  const ChunkSlots slots = TwoOptimizersOnRanks({2, 9}, {2, 9, 11});
  EXPECT_EQ(slots.num_contributors(), 4u);
  EXPECT_EQ(slots.ContributorSlot(2, "dense"), 0u);
  EXPECT_EQ(slots.ContributorSlot(2, "expert"), 1u);
  EXPECT_EQ(slots.ContributorSlot(9, "dense"), 2u);
  EXPECT_EQ(slots.ContributorSlot(9, "expert"), 3u);
  EXPECT_EQ(slots.ContributorSlot(9, "other"), std::nullopt);
  EXPECT_EQ(slots.ContributorSlot(11, "dense"), std::nullopt);  // a member, not a contributor
  EXPECT_EQ(slots.ContributorAt(3), (Contributor{9, "expert"}));
  EXPECT_EQ(slots.num_members(), 3u);
  EXPECT_EQ(slots.MemberSlot(11), 2u);
  EXPECT_EQ(slots.MemberSlot(10), std::nullopt);
  EXPECT_EQ(slots.MemberAt(1), 9u);
}

TEST(StagedSetTest, SlotsAndKeysTogether) {
  const ChunkSlots slots = TwoOptimizersOnRanks({0, 1}, {0, 1});
  OptimizerIds ids;
  StagedSet staged;
  staged.Init(&ids, &slots);
  const absl::Time t = absl::FromUnixSeconds(100);
  EXPECT_TRUE(staged.Insert({1, "expert"}, StagedMark(7, t)));
  EXPECT_FALSE(staged.Insert({1, "expert"}, StagedMark(8, t)));  // already in: unchanged
  EXPECT_TRUE(staged.Insert({5, "dense"}, StagedMark(std::nullopt, t)));  // not a slot: keyed
  EXPECT_FALSE(staged.Insert({5, "dense"}, StagedMark(std::nullopt, t)));
  EXPECT_EQ(staged.size(), 2u);
  ASSERT_NE(staged.Find({1, "expert"}), nullptr);
  EXPECT_EQ(staged.Find({1, "expert"})->checksum(), 7u);
  EXPECT_EQ(staged.Find({1, "expert"})->at(), t);
  EXPECT_EQ(staged.Find({1, "dense"}), nullptr);
  EXPECT_TRUE(staged.contains({5, "dense"}));
  std::vector<Contributor> seen;
  staged.ForEach([&](const Contributor& c, const StagedMark&) { seen.push_back(c); });
  EXPECT_EQ(seen, (std::vector<Contributor>{{1, "expert"}, {5, "dense"}}));

  StagedSet keyed_only;  // a chunk-step started before the plan was complete
  keyed_only.Init(&ids, nullptr);
  EXPECT_TRUE(keyed_only.empty());
  EXPECT_TRUE(keyed_only.Insert({1, "expert"}, StagedMark(std::nullopt, t)));
  EXPECT_TRUE(keyed_only.contains({1, "expert"}));
  EXPECT_FALSE(keyed_only.contains({0, "expert"}));
}

TEST(DoneSetTest, SlotsAndKeysTogether) {
  const ChunkSlots slots = TwoOptimizersOnRanks({0}, {0, 3});
  DoneSet done;
  done.Init(&slots);
  EXPECT_TRUE(done.Insert(3, GroupChecksums{{"dp", 42}}));
  EXPECT_FALSE(done.Insert(3, GroupChecksums{{"dp", 43}}));
  EXPECT_TRUE(done.Insert(8, GroupChecksums()));  // not a member slot: keyed
  EXPECT_EQ(done.size(), 2u);
  ASSERT_NE(done.Find(3), nullptr);
  EXPECT_EQ(done.Find(3)->at(0).checksum, 42u);
  EXPECT_EQ(done.Find(0), nullptr);
  EXPECT_TRUE(done.contains(8));
  std::vector<RankId> seen;
  done.ForEach([&](RankId r, const GroupChecksums&) { seen.push_back(r); });
  EXPECT_EQ(seen, (std::vector<RankId>{3, 8}));
}

}  // namespace
}  // namespace psync::core
