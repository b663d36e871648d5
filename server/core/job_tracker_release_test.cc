// JobTracker scenario tests: release only after every declared contributor staged, once, for
// every plan shape (dense-only, expert-only, mixed, partial sync groups, ranks without experts).
// Exact decisions (deliveries, events, sequence numbers, status codes) driven through the
// Harness of job_tracker_test_harness.h, which audits every decision with an InvariantChecker
// and asserts a refused call leaves Snapshot() and NoticesToHold() unchanged.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/invariant_checker.h"
#include "server/core/job_tracker.h"
#include "server/core/job_tracker_test_harness.h"
#include "server/core/test_util.h"

namespace psync::core::testing {
namespace {

// ---------------------------------------------------------------------------------------------
// Release only after every contributor

TEST(JobTrackerTest, ReleasesOnlyAfterEveryContributorInEveryOrder) {
  std::vector<Contributor> order = {{0, "dense"}, {0, "expert"}, {1, "dense"}, {1, "expert"}};
  int orders = 0;
  do {
    ++orders;
    SCOPED_TRACE(absl::StrCat("order #", orders));
    Harness h(TwoRankPlans(), TwoRankExpected());
    h.JoinAll();
    for (size_t i = 0; i < order.size(); ++i) {
      h.Tick(absl::Seconds(1));
      const Contributor& c = order[i];
      ASSERT_TRUE(h.Stage(c.rank, {Item(0, 0, c.optimizer)}).ok());
      const std::string checkin = absl::StrCat("checkin g1 s0 c0 r", c.rank, " ", c.optimizer);
      if (i + 1 < order.size()) {
        EXPECT_THAT(h.deliveries(), IsEmpty());
        EXPECT_THAT(h.events(), ElementsAre(checkin));
        continue;
      }
      EXPECT_THAT(h.deliveries(),
                  ElementsAre("r0 directive g1 s0 c0 seq1", "r1 directive g1 s0 c0 seq1"));
      EXPECT_THAT(h.events(), ElementsAre(checkin, absl::StrCat("release g1 s0 c0 r", c.rank, " ",
                                                                c.optimizer, " seq1")));
      for (size_t d = 0; d < 2; ++d) {
        EXPECT_EQ(DirectiveAt(h.out(), d).last, c);
        EXPECT_EQ(DirectiveAt(h.out(), d).wait, absl::Seconds(3));  // first check-in to release
        EXPECT_EQ(DirectiveAt(h.out(), d).released_at, h.now());    // the deciding call's time
      }
      // One directive object for every member: addressing a release copies a pointer a rank.
      EXPECT_EQ(h.out().deliveries[0].notice, h.out().deliveries[1].notice);
      EXPECT_EQ(EventsOf(h.out(), EventKind::kRelease)[0].detail,
                absl::StrCat("all 4 contributors staged; last rank ", c.rank, " ", c.optimizer,
                             "; directive to 2 ranks"));
    }
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(orders, 24);
}

// Every MoePlans rank stages all of step 0 in one batch, its items out of chunk order; nothing is
// released before rank 3's batch, which completes all three chunks.
void StageEveryChunkOfStep0(Harness& h) {
  for (RankId r = 0; r < 4; ++r) {
    if (r > 0) {
      EXPECT_THAT(h.deliveries(), IsEmpty());
    }
    ASSERT_TRUE(h.Stage(r, {Item(0, 2, "expert"), Item(0, 0, "dense"), Item(0, 0, "expert"),
                            Item(0, 1, "dense")})
                    .ok());
  }
}

// The owner keeps each chunk's members grouped by where their notices go: asked to, the tracker
// addresses a release to the chunk's members as a whole, one delivery a release instead of one a
// member, for every chunk shape (mixed, dense-only, expert-only) and in chunk order. The checker
// counts it as a directive to each expected member, exactly once.
TEST(JobTrackerTest, AReleaseGoesToTheMembersAsAWholeWhenTheOwnerAsks) {
  Harness h(MoePlans(), MoeExpected());
  h.DeliverToMembersWhole();
  h.JoinAll();
  StageEveryChunkOfStep0(h);
  EXPECT_THAT(h.deliveries(), ElementsAre("members of c0 directive g1 s0 c0 seq1",
                                          "members of c1 directive g1 s0 c1 seq2",
                                          "members of c2 directive g1 s0 c2 seq3"));
  EXPECT_EQ(DirectiveAt(h.out(), 0).released_at, h.now());
  // Every member's SyncDone completes each chunk: the release reached all four.
  for (RankId r = 0; r < 4; ++r) {
    ASSERT_TRUE(h.SyncDone(r, h.DoneItems(r, 0)).ok());
  }
  EXPECT_THAT(EventsOf(h.out(), EventKind::kSyncComplete), ::testing::SizeIs(3));
  const absl::Status complete = h.checker().CheckComplete(h.generation(), {0}, {});
  EXPECT_TRUE(complete.ok()) << complete;
}

TEST(JobTrackerTest, ABatchCompletingSeveralChunksReleasesEachOnceInChunkOrder) {
  Harness h(MoePlans(), MoeExpected());
  h.JoinAll();
  StageEveryChunkOfStep0(h);
  EXPECT_THAT(h.deliveries(),
              ElementsAre("r0 directive g1 s0 c0 seq1", "r1 directive g1 s0 c0 seq1",
                          "r2 directive g1 s0 c0 seq1", "r3 directive g1 s0 c0 seq1",
                          "r0 directive g1 s0 c1 seq2", "r1 directive g1 s0 c1 seq2",
                          "r2 directive g1 s0 c1 seq2", "r3 directive g1 s0 c1 seq2",
                          "r0 directive g1 s0 c2 seq3", "r1 directive g1 s0 c2 seq3",
                          "r2 directive g1 s0 c2 seq3", "r3 directive g1 s0 c2 seq3"));
  EXPECT_THAT(h.events(),
              ElementsAre("checkin g1 s0 c2 r3 expert", "checkin g1 s0 c0 r3 dense",
                          "checkin g1 s0 c0 r3 expert", "checkin g1 s0 c1 r3 dense",
                          "release g1 s0 c0 r3 expert seq1", "release g1 s0 c1 r3 dense seq2",
                          "release g1 s0 c2 r3 expert seq3"));
}
// ---------------------------------------------------------------------------------------------
// Chunk shapes

TEST(JobTrackerTest, DenseOnlyChunkWaitsForEveryDenseOptimizerOnly) {
  Harness h(MoePlans(), MoeExpected());
  h.JoinAll();
  for (RankId r = 0; r < 4; ++r) {
    ASSERT_TRUE(h.Stage(r, {Item(0, 1, "dense")}).ok());
    if (r < 3) {
      EXPECT_THAT(h.deliveries(), IsEmpty());
    }
  }
  EXPECT_THAT(h.deliveries(),
              ElementsAre("r0 directive g1 s0 c1 seq1", "r1 directive g1 s0 c1 seq1",
                          "r2 directive g1 s0 c1 seq1", "r3 directive g1 s0 c1 seq1"));
  // Expert optimizers declared nothing in chunk 1.
  h.ExpectRefused([&] { return h.Stage(0, {Item(0, 1, "expert")}); },
                  absl::StatusCode::kInvalidArgument,
                  "items[0].optimizer 'expert' is not declared by rank 0 for chunk 1 (declared: "
                  "[dense])");
}

TEST(JobTrackerTest, ExpertOnlyChunkWithSmallerExpertGroupsSyncsTheUnion) {
  // W=4, E=2: chunk 2's groups are edp0=[0,2] and edp1=[1,3]; its directive goes to all four.
  Harness h(MoePlans(), MoeExpected());
  h.JoinAll();
  for (RankId r : {0, 2, 1}) {
    ASSERT_TRUE(h.Stage(r, {Item(0, 2, "expert")}).ok());
    EXPECT_THAT(h.deliveries(), IsEmpty());
  }
  ASSERT_TRUE(h.Stage(3, {Item(0, 2, "expert")}).ok());
  EXPECT_THAT(h.deliveries(),
              ElementsAre("r0 directive g1 s0 c2 seq1", "r1 directive g1 s0 c2 seq1",
                          "r2 directive g1 s0 c2 seq1", "r3 directive g1 s0 c2 seq1"));
  EXPECT_THAT(h.events(),
              ElementsAre("checkin g1 s0 c2 r3 expert", "release g1 s0 c2 r3 expert seq1"));
  h.ExpectRefused([&] { return h.Stage(1, {Item(0, 2, "dense")}); },
                  absl::StatusCode::kInvalidArgument, "items[0].optimizer 'dense'");
  // SyncDone names the rank's own groups: rank 1 is in edp1, not edp0.
  h.ExpectRefused(
      [&] {
        return h.SyncDone(1, {Done(0, 2, {{"edp0", 1}})});
      },
      absl::StatusCode::kInvalidArgument,
      "items[0].checksums[0].group 'edp0' is not a sync group of rank 1 in chunk 2");
  h.ExpectRefused(
      [&] {
        return h.SyncDone(1, {Done(0, 2, {{"edp1", 1}, {"edp1", 1}})});
      },
      absl::StatusCode::kInvalidArgument, "items[0].checksums[1].group 'edp1' is listed twice");
}

TEST(JobTrackerTest, MixedChunkWaitsForDenseAndExpertOfEveryRank) {
  Harness h(MoePlans(), MoeExpected());
  h.JoinAll();
  std::vector<Contributor> all = MoeExpected()[0].contributors;
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_TRUE(h.Stage(all[i].rank, {Item(0, 0, all[i].optimizer)}).ok());
    EXPECT_EQ(h.out().deliveries.size(), i + 1 == all.size() ? 4u : 0u) << i;
  }
}

TEST(JobTrackerTest, ChunkSyncedBySomeRanksOnlyIsDeliveredToThemOnly) {
  // Chunk 1 is expert-only and declared by ranks 0 and 2 only (edp0=[0,2]).
  std::vector<RankPlan> plans;
  for (RankId r = 0; r < 4; ++r) {
    std::vector<ChunkPart> parts = {Part(0, {"dense"}, {Group("dp", {0, 1, 2, 3})})};
    if (r % 2 == 0) parts.push_back(Part(1, {"expert"}, {Group("edp0", {0, 2})}));
    plans.push_back(Plan(r, 4, 2, parts));
  }
  Harness h(plans, {{{{0, "dense"}, {1, "dense"}, {2, "dense"}, {3, "dense"}}, {0, 1, 2, 3}},
                    {{{0, "expert"}, {2, "expert"}}, {0, 2}}});
  h.JoinAll();
  ASSERT_TRUE(h.Stage(2, {Item(0, 1, "expert")}).ok());
  ASSERT_TRUE(h.Stage(0, {Item(0, 1, "expert")}).ok());
  EXPECT_THAT(h.deliveries(),
              ElementsAre("r0 directive g1 s0 c1 seq1", "r2 directive g1 s0 c1 seq1"));
  h.ExpectRefused(
      [&] { return h.Stage(1, {Item(0, 1, "expert")}); }, absl::StatusCode::kInvalidArgument,
      "items[0].optimizer 'expert' is not declared by rank 1 for chunk 1 (declared: [])");
  h.ExpectRefused([&] { return h.SyncDone(1, {Done(0, 1)}); }, absl::StatusCode::kInvalidArgument,
                  "items[0].chunk 1: rank 1 is in no sync group of chunk 1");
  for (RankId r = 0; r < 4; ++r) ASSERT_TRUE(h.Stage(r, {Item(0, 0, "dense")}).ok());
  // Rank 1 syncs chunk 0 only: one SyncDone finishes its step. Rank 0 needs both.
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 0)}).ok());
  EXPECT_EQ(h.tracker().rank_step(1), 1u);
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 0)}).ok());
  EXPECT_EQ(h.tracker().rank_step(0), 0u);
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 1)}).ok());
  EXPECT_EQ(h.tracker().rank_step(0), 1u);
}

TEST(JobTrackerTest, RankWhoseExpertHasNothingInAChunkIsNotWaitedFor) {
  // Chunk 0: rank 1 declares only "dense" there. Chunk 1: both ranks stage dense and expert.
  std::vector<RankPlan> plans = {
      Plan(0, 2, 2,
           {Part(0, {"dense", "expert"}, {Group("dp", {0, 1})}),
            Part(1, {"dense", "expert"}, {Group("dp", {0, 1})})}),
      Plan(1, 2, 2,
           {Part(0, {"dense"}, {Group("dp", {0, 1})}),
            Part(1, {"dense", "expert"}, {Group("dp", {0, 1})})}),
  };
  Harness h(plans, {{{{0, "dense"}, {0, "expert"}, {1, "dense"}}, {0, 1}},
                    {{{0, "dense"}, {0, "expert"}, {1, "dense"}, {1, "expert"}}, {0, 1}}});
  h.JoinAll();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense"), Item(0, 0, "expert"), Item(0, 1, "dense")}).ok());
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense"), Item(0, 1, "dense")}).ok());
  EXPECT_THAT(h.deliveries(),
              ElementsAre("r0 directive g1 s0 c0 seq1", "r1 directive g1 s0 c0 seq1"));
  h.ExpectRefused([&] { return h.Stage(1, {Item(0, 0, "expert")}); },
                  absl::StatusCode::kInvalidArgument,
                  "items[0].optimizer 'expert' is not declared by rank 1 for chunk 0 (declared: "
                  "[dense])");
  ASSERT_TRUE(h.Stage(1, {Item(0, 1, "expert")}).ok());
  EXPECT_THAT(h.deliveries(), IsEmpty());
  ASSERT_TRUE(h.Stage(0, {Item(0, 1, "expert")}).ok());
  EXPECT_THAT(h.deliveries(),
              ElementsAre("r0 directive g1 s0 c1 seq2", "r1 directive g1 s0 c1 seq2"));
}

}  // namespace
}  // namespace psync::core::testing
