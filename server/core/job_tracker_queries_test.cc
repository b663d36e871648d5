// JobTracker scenario tests: Pending, Snapshot and the lowest rank step.
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
// Pending and Snapshot

TEST(JobTrackerTest, PendingRelistsDirectivesUntilSyncDone) {
  Harness h(MoePlans(), MoeExpected());
  h.JoinAll();
  for (RankId r = 0; r < 4; ++r) EXPECT_THAT(h.tracker().NoticesToHold(r), IsEmpty());
  for (RankId r = 0; r < 4; ++r) ASSERT_TRUE(h.Stage(r, {Item(0, 1, "dense")}).ok());
  const absl::Time released_c1 = h.now();
  h.Tick(absl::Seconds(2));
  for (RankId r = 0; r < 4; ++r) ASSERT_TRUE(h.Stage(r, {Item(0, 2, "expert")}).ok());
  h.Tick(absl::Seconds(5));
  auto pending = [&](RankId r) {
    Strings out;
    for (const Notice& n : h.tracker().NoticesToHold(r)) out.push_back(NoticeText(n));
    return out;
  };
  for (RankId r = 0; r < 4; ++r) {
    EXPECT_THAT(pending(r), ElementsAre("directive g1 s0 c1 seq1", "directive g1 s0 c2 seq2"));
  }
  const SyncDirective first = std::get<SyncDirective>(h.tracker().NoticesToHold(0)[0]);
  EXPECT_EQ(first.last, (Contributor{3, "dense"}));
  // Listed again later, a directive keeps the time its release was decided.
  EXPECT_EQ(first.released_at, released_c1);
  EXPECT_EQ(std::get<SyncDirective>(h.tracker().NoticesToHold(0)[1]).released_at,
            released_c1 + absl::Seconds(2));
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 2)}).ok());
  EXPECT_THAT(pending(0), ElementsAre("directive g1 s0 c1 seq1"));
  EXPECT_THAT(pending(1), ElementsAre("directive g1 s0 c1 seq1", "directive g1 s0 c2 seq2"));
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 1)}).ok());
  EXPECT_THAT(pending(0), IsEmpty());
  EXPECT_EQ(h.tracker().rank_step(0), 0u) << "chunk 0 is not released yet";
  EXPECT_THAT(pending(9), IsEmpty());
}

TEST(JobTrackerTest, SnapshotListsContributorsOnlyForChunksWaitingLongerThanAsked) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  h.Tick(absl::Seconds(2));
  // Waiting 2 s: no lists past a 5 s threshold, state and waiting time still there.
  JobSnapshot snap = h.tracker().Snapshot(h.now(), absl::Seconds(5));
  ASSERT_EQ(snap.chunks.size(), 1u);
  EXPECT_EQ(snap.chunks[0].state, "WAITING");
  EXPECT_EQ(snap.chunks[0].waiting, absl::Seconds(2));
  EXPECT_THAT(snap.chunks[0].staged, IsEmpty());
  EXPECT_THAT(snap.chunks[0].missing, IsEmpty());
  h.Tick(absl::Seconds(4));
  snap = h.tracker().Snapshot(h.now(), absl::Seconds(5));
  EXPECT_THAT(snap.chunks[0].staged, ElementsAre(Contributor{0, "dense"}));
  EXPECT_EQ(snap.chunks[0].missing.size(), 3u);
}

TEST(JobTrackerTest, LowestRankStepFollowsAdvancesAndSkips) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  EXPECT_EQ(h.tracker().Snapshot(h.now()).min_rank_step, 0u);
  for (RankId r : {0u, 1u}) {
    ASSERT_TRUE(h.Stage(r, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
  }
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 0)}).ok());
  EXPECT_EQ(h.tracker().Snapshot(h.now()).min_rank_step, 0u);  // rank 1 still at step 0
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 0)}).ok());
  EXPECT_EQ(h.tracker().Snapshot(h.now()).min_rank_step, 1u);
  ASSERT_TRUE(h.Skip(0, 1).ok());
  ASSERT_TRUE(h.Skip(1, 1).ok());
  EXPECT_EQ(h.tracker().Snapshot(h.now()).min_rank_step, 2u);
  EXPECT_EQ(h.tracker().rank_step(0), 2u);
  EXPECT_EQ(h.tracker().rank_step(1), 2u);
}

TEST(JobTrackerTest, SnapshotShowsMissingContributorsAndWaitingTime) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  JobSnapshot snap = h.tracker().Snapshot(h.now());
  EXPECT_EQ(snap.state, JobState::kRunning);
  EXPECT_EQ(snap.ranks_joined, 2u);
  ASSERT_EQ(snap.chunks.size(), 1u);
  EXPECT_EQ(snap.chunks[0].state, "IDLE");
  EXPECT_EQ(snap.chunks[0].missing.size(), 4u);

  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  h.Tick(absl::Seconds(5));
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense")}).ok());
  h.Tick(absl::Seconds(7));
  snap = h.tracker().Snapshot(h.now());
  EXPECT_EQ(snap.chunks[0].step, 0u);
  EXPECT_EQ(snap.chunks[0].state, "WAITING");
  EXPECT_THAT(snap.chunks[0].staged, ElementsAre(Contributor{0, "dense"}, Contributor{1, "dense"}));
  EXPECT_THAT(snap.chunks[0].missing,
              ElementsAre(Contributor{0, "expert"}, Contributor{1, "expert"}));
  EXPECT_EQ(snap.chunks[0].waiting, absl::Seconds(12));
  h.Tick(absl::Minutes(1));
  EXPECT_EQ(h.tracker().Snapshot(h.now()).chunks[0].waiting, absl::Seconds(72));

  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "expert")}).ok());
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "expert")}).ok());
  h.Tick(absl::Seconds(3));
  snap = h.tracker().Snapshot(h.now());
  EXPECT_EQ(snap.chunks[0].state, "RELEASED");
  EXPECT_THAT(snap.chunks[0].missing, IsEmpty());
  EXPECT_EQ(snap.chunks[0].waiting, absl::Seconds(3));
  EXPECT_THAT(snap.chunks[0].sync_pending, ElementsAre(0, 1));
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 0)}).ok());
  EXPECT_THAT(h.tracker().Snapshot(h.now()).chunks[0].sync_pending, ElementsAre(0));
  EXPECT_EQ(h.tracker().Snapshot(h.now()).min_rank_step, 0u);
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 0)}).ok());
  snap = h.tracker().Snapshot(h.now());
  EXPECT_EQ(snap.min_rank_step, 1u);
  EXPECT_EQ(snap.chunks[0].step, 1u);
  EXPECT_EQ(snap.chunks[0].state, "IDLE");
  EXPECT_EQ(snap.chunks[0].missing.size(), 4u);
}

// ChunkAt and Snapshot with a list limit: each list holds its first entries by rank, the counts
// all of them, whatever the chunk's state.
TEST(JobTrackerTest, ChunkAtAndSnapshotListAtMostTheLimitAndCountEveryone) {
  constexpr uint32_t kWorld = 8;
  std::vector<RankId> all;
  for (RankId r = 0; r < kWorld; ++r) all.push_back(r);
  std::vector<RankPlan> plans;
  ExpectedChunk expected{{}, all};
  for (RankId r = 0; r < kWorld; ++r) {
    plans.push_back(Plan(r, kWorld, 1, {Part(0, {"dense", "expert"}, {Group("dp", all)})}));
    expected.contributors.push_back({r, "dense"});
    expected.contributors.push_back({r, "expert"});
  }
  Harness h(plans, {expected});
  h.JoinAll();
  // Not started: every contributor missing.
  absl::StatusOr<ChunkSnapshot> c = h.tracker().ChunkAt(0, 0, h.now(), 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state, "IDLE");
  EXPECT_THAT(c->missing, ElementsAre(Contributor{0, "dense"}, Contributor{0, "expert"},
                                      Contributor{1, "dense"}));
  EXPECT_EQ(c->missing_count, 2 * kWorld);
  // Ranks 1, 3, 5 and 6 staged both optimizers, 5 s apart from rank 1's.
  for (RankId r : {1u, 3u, 5u, 6u}) {
    ASSERT_TRUE(h.Stage(r, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
    h.Tick(absl::Seconds(5));
  }
  c = h.tracker().ChunkAt(0, 0, h.now(), 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state, "WAITING");
  EXPECT_THAT(c->staged, ElementsAre(Contributor{1, "dense"}, Contributor{1, "expert"},
                                     Contributor{3, "dense"}));
  EXPECT_THAT(c->staged_after,
              ElementsAre(absl::ZeroDuration(), absl::ZeroDuration(), absl::Seconds(5)));
  EXPECT_EQ(c->staged_count, 8u);
  EXPECT_THAT(c->missing, ElementsAre(Contributor{0, "dense"}, Contributor{0, "expert"},
                                      Contributor{2, "dense"}));
  EXPECT_EQ(c->missing_count, 8u);
  // Snapshot cuts its lists the same way, with the same counts.
  JobSnapshot snap =
      h.tracker().Snapshot(h.now(), -absl::InfiniteDuration(), SnapshotLists::kAll, 3);
  ASSERT_EQ(snap.chunks.size(), 1u);
  EXPECT_THAT(snap.chunks[0].staged, ElementsAre(Contributor{1, "dense"}, Contributor{1, "expert"},
                                                 Contributor{3, "dense"}));
  EXPECT_THAT(snap.chunks[0].missing, ElementsAre(Contributor{0, "dense"}, Contributor{0, "expert"},
                                                  Contributor{2, "dense"}));
  EXPECT_EQ(snap.chunks[0].staged_count, 8u);
  EXPECT_EQ(snap.chunks[0].missing_count, 8u);
  // Without a limit the lists are whole, and the same counts.
  const absl::StatusOr<ChunkSnapshot> whole = h.tracker().ChunkAt(0, 0, h.now());
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->staged.size(), 8u);
  EXPECT_EQ(whole->missing.size(), 8u);
  EXPECT_EQ(whole->staged_count, 8u);
  EXPECT_EQ(whole->missing_count, 8u);
  // Released; ranks 0 and 4 reported SyncDone: the first three of the six others are listed.
  for (RankId r : {0u, 2u, 4u, 7u}) {
    ASSERT_TRUE(h.Stage(r, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
  }
  for (RankId r : {0u, 4u}) ASSERT_TRUE(h.SyncDone(r, {Done(0, 0)}).ok());
  c = h.tracker().ChunkAt(0, 0, h.now(), 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state, "RELEASED");
  EXPECT_THAT(c->sync_pending, ElementsAre(1, 2, 3));
  EXPECT_EQ(c->sync_pending_count, 6u);
  EXPECT_EQ(c->staged_count, 16u);
  EXPECT_THAT(c->missing, IsEmpty());
  EXPECT_EQ(c->missing_count, 0u);
  EXPECT_EQ(h.tracker().ChunkAt(0, 0, h.now())->sync_pending.size(), 6u);
  snap = h.tracker().Snapshot(h.now(), -absl::InfiniteDuration(), SnapshotLists::kAll, 3);
  EXPECT_THAT(snap.chunks[0].sync_pending, ElementsAre(1, 2, 3));
  EXPECT_EQ(snap.chunks[0].sync_pending_count, 6u);
  EXPECT_EQ(h.tracker().Snapshot(h.now()).chunks[0].sync_pending.size(), 6u);
}

}  // namespace
// kHoldingBack lists only who holds a chunk back (and the members), with the same counts.
TEST(JobTrackerTest, SnapshotOfWhoHoldsBackLeavesOutStagedListsAndIdleChunks) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  auto brief = [&] {
    return h.tracker().Snapshot(h.now(), -absl::InfiniteDuration(), SnapshotLists::kHoldingBack);
  };
  JobSnapshot snap = brief();
  ASSERT_EQ(snap.chunks.size(), 1u);
  EXPECT_EQ(snap.chunks[0].state, "IDLE");
  EXPECT_THAT(snap.chunks[0].missing, IsEmpty());
  EXPECT_THAT(snap.chunks[0].members, IsEmpty());
  EXPECT_EQ(snap.chunks[0].missing_count, 4u);
  EXPECT_EQ(snap.chunks[0].staged_count, 0u);

  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense")}).ok());
  snap = brief();
  EXPECT_EQ(snap.chunks[0].state, "WAITING");
  EXPECT_THAT(snap.chunks[0].staged, IsEmpty());
  EXPECT_THAT(snap.chunks[0].missing, IsEmpty());
  ASSERT_EQ(snap.chunks[0].missing_by_optimizer.size(), 1u);
  EXPECT_EQ(snap.chunks[0].missing_by_optimizer[0].optimizer, "expert");
  EXPECT_THAT(snap.chunks[0].missing_by_optimizer[0].ranks, ElementsAre(0, 1));
  EXPECT_EQ(snap.chunks[0].staged_count, 2u);
  EXPECT_EQ(snap.chunks[0].missing_count, 2u);
  EXPECT_THAT(snap.chunks[0].members, ElementsAre(0, 1));
  const JobSnapshot full = h.tracker().Snapshot(h.now());
  EXPECT_EQ(full.chunks[0].staged_count, 2u);
  EXPECT_EQ(full.chunks[0].missing_count, 2u);
  EXPECT_THAT(full.chunks[0].members, IsEmpty());

  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "expert")}).ok());
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "expert")}).ok());
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 0)}).ok());
  snap = brief();
  EXPECT_EQ(snap.chunks[0].state, "RELEASED");
  EXPECT_THAT(snap.chunks[0].sync_pending, ElementsAre(0));
  EXPECT_THAT(snap.chunks[0].members, ElementsAre(0, 1));
  EXPECT_EQ(snap.chunks[0].staged_count, 4u);
  EXPECT_EQ(snap.chunks[0].missing_count, 0u);
}

// kHoldingBack's missing contributors, by optimizer name, are those kAll lists one by one.
TEST(JobTrackerTest, SnapshotOfWhoHoldsBackGroupsTheMissingByOptimizerName) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  const JobSnapshot all = h.tracker().Snapshot(h.now());
  EXPECT_THAT(all.chunks[0].missing, ElementsAre(Contributor{0, "expert"}, Contributor{1, "dense"},
                                                 Contributor{1, "expert"}));
  const JobSnapshot brief =
      h.tracker().Snapshot(h.now(), -absl::InfiniteDuration(), SnapshotLists::kHoldingBack);
  const auto& groups = brief.chunks[0].missing_by_optimizer;
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].optimizer, "dense");
  EXPECT_THAT(groups[0].ranks, ElementsAre(1));
  EXPECT_EQ(groups[1].optimizer, "expert");
  EXPECT_THAT(groups[1].ranks, ElementsAre(0, 1));
  EXPECT_EQ(brief.chunks[0].missing_count, 3u);
  EXPECT_EQ(brief.chunks[0].staged_count, 1u);
}

}  // namespace psync::core::testing
