// ChunkSlots and RankRuns give each contributor and member its exact position, for dense and sparse
// rank layouts; StagedSet and DoneSet (chunk_sets.h) keep marks by slot and anyone the slots do not
// list by key.
#include "server/core/chunk_slots.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/core/chunk_sets.h"

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

TEST(RankRunsTest, UniformLayoutIsComputedWithTheSameRuns) {
  // Every rank of the span holds 2 positions, then 1: computed runs, as a table would give them.
  const RankRuns pairs(std::vector<RankId>{4, 4, 5, 5, 6, 6});
  EXPECT_EQ(pairs.Find(4), Positions(0, 2));
  EXPECT_EQ(pairs.Find(5), Positions(2, 4));
  EXPECT_EQ(pairs.Find(6), Positions(4, 6));
  for (RankId outside : {0u, 3u, 7u, 1u << 31, ~0u}) {
    EXPECT_EQ(pairs.Find(outside).first, pairs.Find(outside).second) << outside;
  }
  const RankRuns singles(std::vector<RankId>{10, 11, 12});
  EXPECT_EQ(singles.Find(10), Positions(0, 1));
  EXPECT_EQ(singles.Find(12), Positions(2, 3));
  EXPECT_EQ(singles.Find(13).first, singles.Find(13).second);
  EXPECT_EQ(singles.Find(9).first, singles.Find(9).second);
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

// Contributors: "dense" and "expert" on each of `ranks`. Groups: `groups`; members: their union.
ChunkSlots TwoOptimizersOnRanks(std::vector<RankId> ranks,
                                std::map<std::string, std::vector<RankId>> groups) {
  absl::btree_set<Contributor> contributors;
  for (RankId r : ranks) {
    contributors.insert({r, "dense"});
    contributors.insert({r, "expert"});
  }
  std::vector<RankId> members;
  for (const auto& [name, group] : groups)
    members.insert(members.end(), group.begin(), group.end());
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  return ChunkSlots(contributors, members, groups);
}

TEST(ChunkSlotsTest, SlotsFollowContributorOrder) {
  const ChunkSlots slots = TwoOptimizersOnRanks({2, 9}, {{"dp", {2, 9, 11}}, {"tp", {9}}});
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
  ASSERT_NE(slots.OnlyGroupOf(0), nullptr);
  EXPECT_EQ(*slots.OnlyGroupOf(0), "dp");
  EXPECT_EQ(slots.OnlyGroupOf(1), nullptr);  // rank 9 is in dp and tp
  EXPECT_EQ(*slots.OnlyGroupOf(2), "dp");
}

// Every contributor's slot is its position in (rank, optimizer) order, whether the layout lets
// the slot be computed (every rank of a span with every optimizer) or not (a gap, a rank with one
// optimizer, a rank with an optimizer the others lack): looked up by name and by index alike.
TEST(ChunkSlotsTest, ComputedAndLookedUpSlotsAgree) {
  const std::vector<std::vector<Contributor>> layouts = {
      {{5, "a"}, {5, "b"}, {6, "a"}, {6, "b"}, {7, "a"}, {7, "b"}},  // regular from rank 5
      {{0, "a"}, {0, "b"}, {2, "a"}, {2, "b"}},                      // rank 1 missing
      {{0, "a"}, {0, "b"}, {1, "a"}, {2, "a"}, {2, "b"}},            // rank 1 lacks "b"
      {{0, "a"}, {1, "a"}, {1, "c"}},                                // rank 1 alone has "c"
      {{0, "a"}, {0, "b"}, {1, "a"}, {1, "c"}, {2, "b"}, {2, "c"}},  // 6 of 3 x 3, not all
      {{3, "x"}},                                                    // one contributor
  };
  for (const std::vector<Contributor>& layout : layouts) {
    const absl::btree_set<Contributor> contributors(layout.begin(), layout.end());
    const ChunkSlots slots(contributors, {}, {});
    uint32_t expected = 0;
    for (const Contributor& c : contributors) {
      EXPECT_EQ(slots.ContributorSlot(c.rank, c.optimizer), expected) << c.rank << c.optimizer;
      const std::optional<uint32_t> index = slots.OptimizerIndex(c.optimizer);
      ASSERT_TRUE(index.has_value());
      EXPECT_EQ(slots.ContributorSlotAt(c.rank, *index), expected) << c.rank << c.optimizer;
      EXPECT_EQ(slots.ContributorAt(expected), c);
      ++expected;
    }
    // Nothing else has a slot: ranks around and between the contributors, every optimizer.
    for (RankId rank = 0; rank < 10; ++rank) {
      for (const char* optimizer : {"a", "b", "c", "x", "z"}) {
        if (contributors.contains(Contributor{rank, optimizer})) continue;
        EXPECT_EQ(slots.ContributorSlot(rank, optimizer), std::nullopt) << rank << optimizer;
        if (std::optional<uint32_t> index = slots.OptimizerIndex(optimizer); index.has_value()) {
          EXPECT_EQ(slots.ContributorSlotAt(rank, *index), std::nullopt) << rank << optimizer;
        }
      }
    }
    EXPECT_EQ(slots.OptimizerIndex("z"), std::nullopt);
    EXPECT_EQ(slots.ContributorSlotAt(1u << 31, 0), std::nullopt);
  }
}

TEST(StagedSetTest, SlotsAndKeysTogether) {
  const ChunkSlots slots = TwoOptimizersOnRanks({0, 1}, {{"dp", {0, 1}}});
  OptimizerIds ids;
  StagedSet staged;
  staged.Init(&ids, &slots);
  const absl::Time t = absl::FromUnixSeconds(100);
  EXPECT_TRUE(staged.Insert({1, "expert"}, StagedMark(7, t)));
  EXPECT_FALSE(staged.Insert({1, "expert"}, StagedMark(8, t)));           // already in: unchanged
  EXPECT_TRUE(staged.Insert({5, "dense"}, StagedMark(std::nullopt, t)));  // not a slot: keyed
  EXPECT_FALSE(staged.Insert({5, "dense"}, StagedMark(std::nullopt, t)));
  EXPECT_EQ(staged.size(), 2u);
  ASSERT_TRUE(staged.Find({1, "expert"}).has_value());
  EXPECT_EQ(staged.Find({1, "expert"})->checksum(), 7u);
  EXPECT_EQ(staged.Find({1, "expert"})->at(), t);
  EXPECT_FALSE(staged.Find({1, "dense"}).has_value());
  EXPECT_TRUE(staged.Insert({0, "dense"}, StagedMark(std::nullopt, t + absl::Nanoseconds(3))));
  EXPECT_EQ(staged.Find({0, "dense"})->checksum(), std::nullopt);
  EXPECT_EQ(staged.Find({0, "dense"})->at(), t + absl::Nanoseconds(3));
  EXPECT_TRUE(staged.contains({5, "dense"}));
  std::vector<Contributor> seen;
  staged.ForEach([&](const Contributor& c, const StagedMark&) { seen.push_back(c); });
  EXPECT_EQ(seen, (std::vector<Contributor>{{0, "dense"}, {1, "expert"}, {5, "dense"}}));

  StagedSet keyed_only;  // a chunk-step started before the plan was complete
  keyed_only.Init(&ids, nullptr);
  EXPECT_TRUE(keyed_only.empty());
  EXPECT_TRUE(keyed_only.Insert({1, "expert"}, StagedMark(std::nullopt, t)));
  EXPECT_TRUE(keyed_only.contains({1, "expert"}));
  EXPECT_FALSE(keyed_only.contains({0, "expert"}));
}

TEST(DoneSetTest, EveryShapeOfReportComesBackAsSent) {
  // Ranks 0, 1, 2 are only in dp; rank 3 is in dp and tp.
  const ChunkSlots slots = TwoOptimizersOnRanks({0}, {{"dp", {0, 1, 2, 3}}, {"tp", {3}}});
  DoneSet done;
  done.Init(&slots);
  const GroupChecksums one = {{"dp", 42}};
  const GroupChecksums other_group = {{"tp", 5}};
  const GroupChecksums both = {{"dp", 42}, {"tp", 7}};
  EXPECT_TRUE(done.Insert(0, one));            // the implied group: kept in the slot
  EXPECT_FALSE(done.Insert(0, {{"dp", 43}}));  // already in: unchanged
  EXPECT_TRUE(done.Insert(1, GroupChecksums()));
  EXPECT_TRUE(done.Insert(2, other_group));  // not the implied group: kept keyed
  EXPECT_FALSE(done.Insert(2, one));
  EXPECT_TRUE(done.Insert(3, both));              // several groups: kept keyed
  EXPECT_TRUE(done.Insert(8, GroupChecksums()));  // not a member slot: keyed
  EXPECT_EQ(done.size(), 5u);
  EXPECT_EQ(done.Find(0), one);
  EXPECT_EQ(done.Find(1), GroupChecksums());
  EXPECT_EQ(done.Find(2), other_group);
  EXPECT_EQ(done.Find(3), both);
  EXPECT_EQ(done.Find(4), std::nullopt);
  EXPECT_TRUE(done.contains(8));
  EXPECT_FALSE(done.contains(9));
  std::map<RankId, GroupChecksums> seen;
  done.ForEach([&](RankId r, const GroupChecksums& c) { seen.emplace(r, c); });
  EXPECT_EQ(seen, (std::map<RankId, GroupChecksums>{
                      {0, one}, {1, {}}, {2, other_group}, {3, both}, {8, {}}}));

  DoneSet keyed_only;  // a chunk-step started before the plan was complete
  keyed_only.Init(nullptr);
  EXPECT_TRUE(keyed_only.Insert(0, one));
  EXPECT_EQ(keyed_only.Find(0), one);
  EXPECT_EQ(keyed_only.size(), 1u);
}

}  // namespace
}  // namespace psync::core
