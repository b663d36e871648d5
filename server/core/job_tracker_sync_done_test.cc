// JobTracker scenario tests: SyncDone before the directive, the checksum audit, and directives
// acknowledged ahead of the rank's own step.
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
// SyncDone

TEST(JobTrackerTest, SyncDoneBeforeTheDirectiveIsFailedPrecondition) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  h.ExpectRefused([&] { return h.SyncDone(0, {Done(0, 0)}); },
                  absl::StatusCode::kFailedPrecondition,
                  "items[0]: SyncDone before the directive: step 0 chunk 0 has not been released");
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense")}).ok());
  h.ExpectRefused([&] { return h.SyncDone(1, {Done(0, 0)}); },
                  absl::StatusCode::kFailedPrecondition,
                  "items[0]: SyncDone before the directive: step 0 chunk 0 has not been released");
  h.ExpectRefused([&] { return h.SyncDone(1, {Done(1, 0)}); },
                  absl::StatusCode::kFailedPrecondition,
                  "items[0]: SyncDone before the directive: step 1 chunk 0 has not been released");
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "expert")}).ok());
  h.Tick(absl::Milliseconds(250));
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 0, {{"dp", 5}})}).ok());
  EXPECT_THAT(h.events(), ElementsAre("sync_done g1 s0 c0 r1 seq1"));
  EXPECT_THAT(h.deliveries(), IsEmpty());
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 0, {{"dp", 5}})}).ok());
  EXPECT_THAT(h.events(), ElementsAre("sync_done g1 s0 c0 r0 seq1", "sync_complete g1 s0 c0 seq1"));
  EXPECT_EQ(h.out().events[1].detail, "all 2 ranks synced in 250ms");
  // A repeated SyncDone is a duplicate: OK, nothing new.
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 0, {{"dp", 5}})}).ok());
  EXPECT_THAT(h.events(), IsEmpty());
}

// A one-item SyncDone is recorded without the general checks when it is the common report (a
// member's one checksum, the chunk released, no report of the rank yet); every other one must
// get the general checks' exact answer, and a refused one must change nothing.
TEST(JobTrackerTest, OneItemSyncDonesAtTheEdgesOfTheCommonCaseGetTheGeneralAnswers) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  for (RankId r = 0; r < 2; ++r) {
    ASSERT_TRUE(h.Stage(r, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
  }
  // Not a group of the rank in this chunk: refused, naming the field.
  h.ExpectRefused(
      [&] {
        return h.SyncDone(0, {Done(0, 0, {{"tp", 5}})});
      },
      absl::StatusCode::kInvalidArgument,
      "items[0].checksums[0].group 'tp' is not a sync group of rank 0 in chunk 0");
  // Out of range, a generation never issued: refused.
  h.ExpectRefused([&] { return h.SyncDone(0, {Done(0, 1)}); }, absl::StatusCode::kInvalidArgument,
                  "items[0].chunk 1 out of range [0, 1)");
  h.ExpectRefused([&] { return h.SyncDoneIn(0, 7, {Done(0, 0)}); },
                  absl::StatusCode::kFailedPrecondition,
                  "generation 7 is in the future (never issued): job 'job' is at generation 1");
  // Executed twice: recorded, and the repeat is a violation.
  SyncDoneItem twice = Done(0, 0, {{"dp", 5}});
  twice.executions = 2;
  ASSERT_TRUE(h.SyncDone(0, {twice}).ok());
  EXPECT_THAT(h.events(), ElementsAre("violation g1 s0 c0 r0 seq1", "sync_done g1 s0 c0 r0 seq1"));
  EXPECT_EQ(h.out().events[0].detail,
            "repeated sync: rank 0 executed the sync of step 0 chunk 0 2 times");
  // The same report again is a duplicate (OK, nothing new); another checksum is a conflict.
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 0, {{"dp", 5}})}).ok());
  EXPECT_THAT(h.events(), IsEmpty());
  EXPECT_EQ(h.SyncDone(0, {Done(0, 0, {{"dp", 6}})}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(h.events(), ElementsAre("violation g1 s0 c0 r0"));
  EXPECT_EQ(h.tracker().rank_step(0), 1u);
  // The common case: recorded, completes the chunk (checksums agree), advances the rank.
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 0, {{"dp", 5}})}).ok());
  EXPECT_THAT(h.events(), ElementsAre("sync_done g1 s0 c0 r1 seq1", "sync_complete g1 s0 c0 seq1"));
  EXPECT_EQ(h.tracker().rank_step(1), 1u);
}

TEST(JobTrackerTest, SyncDoneChecksumMismatchIsAViolationNamingTheRanks) {
  Harness h(MoePlans(), MoeExpected());
  h.JoinAll();
  for (RankId r = 0; r < 4; ++r) {
    ASSERT_TRUE(h.Stage(r, {Item(0, 0, "dense"), Item(0, 0, "expert"), Item(0, 1, "dense"),
                            Item(0, 2, "expert")})
                    .ok());
  }
  // Chunk 1 (dp): rank 3 disagrees.
  for (RankId r = 0; r < 3; ++r) {
    ASSERT_TRUE(h.SyncDone(r, {Done(0, 1, {{"dp", 7}})}).ok());
    EXPECT_THAT(EventsOf(h.out(), EventKind::kViolation), IsEmpty());
  }
  ASSERT_TRUE(h.SyncDone(3, {Done(0, 1, {{"dp", 8}})}).ok());
  EXPECT_THAT(h.events(), ElementsAre("sync_done g1 s0 c1 r3 seq2", "sync_complete g1 s0 c1 seq2",
                                      "violation g1 s0 c1 seq2"));
  EXPECT_EQ(h.out().events[2].detail,
            "checksum mismatch in group 'dp': 0x7 from ranks [0,1,2]; 0x8 from ranks [3]");
  // Chunk 0: dp agrees, edp0 disagrees between ranks 0 and 2, edp1 agrees.
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 0, {{"dp", 1}, {"edp0", 2}})}).ok());
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 0, {{"dp", 1}, {"edp1", 3}})}).ok());
  ASSERT_TRUE(h.SyncDone(3, {Done(0, 0, {{"edp1", 3}, {"dp", 1}})}).ok());
  ASSERT_TRUE(h.SyncDone(2, {Done(0, 0, {{"dp", 1}, {"edp0", 4}})}).ok());
  std::vector<Event> violations = EventsOf(h.out(), EventKind::kViolation);
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].detail,
            "checksum mismatch in group 'edp0': 0x2 from ranks [0]; 0x4 from ranks [2]");
  // Chunk 2: all agree, no violation.
  for (RankId r = 0; r < 4; ++r) {
    ASSERT_TRUE(h.SyncDone(r, {Done(0, 2, {{absl::StrCat("edp", r % 2), 11}})}).ok());
    EXPECT_THAT(EventsOf(h.out(), EventKind::kViolation), IsEmpty());
  }
  // The mismatch is reported, not fatal: every rank moved on.
  for (RankId r = 0; r < 4; ++r) EXPECT_EQ(h.tracker().rank_step(r), 1u);
}
// ---------------------------------------------------------------------------------------------
// A member that contributes nothing can be handed the next step's directive while it still
// finishes the current one.

TEST(JobTrackerTest, DirectiveAheadOfTheRankStepCanBeAcknowledged) {
  // Chunk 0: dense-only, both ranks contribute. Chunk 1: rank 0's expert contributes; rank 1
  // syncs it but contributes nothing there.
  std::vector<RankPlan> plans = {
      Plan(0, 2, 2,
           {Part(0, {"dense"}, {Group("dp", {0, 1})}), Part(1, {"expert"}, {Group("g", {0, 1})})}),
      Plan(1, 2, 2, {Part(0, {"dense"}, {Group("dp", {0, 1})}), Part(1, {}, {Group("g", {0, 1})})}),
  };
  Harness h(plans, {{{{0, "dense"}, {1, "dense"}}, {0, 1}}, {{{0, "expert"}}, {0, 1}}});
  h.JoinAll();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense"), Item(0, 1, "expert")}).ok());
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense")}).ok());
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 0), Done(0, 1)}).ok());
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 1)}).ok());
  EXPECT_EQ(h.tracker().rank_step(0), 1u);
  EXPECT_EQ(h.tracker().rank_step(1), 0u);
  // Rank 0 alone completes chunk 1 of step 1: rank 1, still in step 0, gets its directive.
  ASSERT_TRUE(h.Stage(0, {Item(1, 1, "expert")}).ok());
  EXPECT_THAT(h.deliveries(),
              ElementsAre("r0 directive g1 s1 c1 seq3", "r1 directive g1 s1 c1 seq3"));
  Strings pending;
  for (const Notice& n : h.tracker().NoticesToHold(1)) pending.push_back(NoticeText(n));
  EXPECT_THAT(pending, ElementsAre("directive g1 s0 c0 seq2", "directive g1 s1 c1 seq3"));
  // Rank 1 executes it and reports it before it reports step 0's chunk 0.
  ASSERT_TRUE(h.SyncDone(1, {Done(1, 1)}).ok());
  EXPECT_THAT(h.events(), ElementsAre("sync_done g1 s1 c1 r1 seq3"));
  EXPECT_EQ(h.tracker().rank_step(1), 0u);
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 0)}).ok());
  EXPECT_EQ(h.tracker().rank_step(1), 1u) << "step 1's chunk 0 is not synced yet";
  ASSERT_TRUE(h.Stage(1, {Item(1, 0, "dense")}).ok());
  ASSERT_TRUE(h.Stage(0, {Item(1, 0, "dense")}).ok());
  ASSERT_TRUE(h.SyncDone(1, {Done(1, 0)}).ok());
  EXPECT_EQ(h.tracker().rank_step(1), 2u);
  ASSERT_TRUE(h.SyncDone(0, {Done(1, 0), Done(1, 1)}).ok());
  EXPECT_EQ(h.tracker().rank_step(0), 2u);
  const std::vector<Step> steps = {0, 1};
  EXPECT_TRUE(h.checker().CheckComplete(1, steps, {}).ok());
}

TEST(JobTrackerTest, MemberThatOnlySyncsAdvancesPastStepsItAcknowledgedAhead) {
  // Rank 1 contributes nothing anywhere; it only syncs chunk 0. It may acknowledge step 1's
  // directive before step 0's, and then finishes both steps at once.
  std::vector<RankPlan> plans = {
      Plan(0, 2, 1, {Part(0, {"dense"}, {Group("dp", {0, 1})})}),
      Plan(1, 2, 1, {Part(0, {}, {Group("dp", {0, 1})})}),
  };
  Harness h(plans, {{{{0, "dense"}}, {0, 1}}});
  h.JoinAll();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 0)}).ok());
  ASSERT_TRUE(h.Stage(0, {Item(1, 0, "dense")}).ok());
  ASSERT_TRUE(h.SyncDone(1, {Done(1, 0)}).ok());
  EXPECT_EQ(h.tracker().rank_step(1), 0u);
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 0)}).ok());
  EXPECT_EQ(h.tracker().rank_step(1), 2u);
  EXPECT_THAT(h.tracker().NoticesToHold(1), IsEmpty());
}

// Four chunks of dense parameters synced by dp = [0, 1]; rank 1 contributes nothing when
// `rank1_contributes` is false (it only syncs, so it may acknowledge directives ahead).
std::vector<RankPlan> FourChunkPlans(bool rank1_contributes) {
  std::vector<RankPlan> plans;
  for (RankId r : {0, 1}) {
    std::vector<ChunkPart> parts;
    for (ChunkId c = 0; c < 4; ++c) {
      const bool contributes = r == 0 || rank1_contributes;
      parts.push_back(
          Part(c, contributes ? std::vector<std::string>{"dense"} : std::vector<std::string>{},
               {Group("dp", {0, 1})}));
    }
    plans.push_back(Plan(r, 2, 4, parts));
  }
  return plans;
}
std::vector<ExpectedChunk> FourChunkExpected(bool rank1_contributes) {
  std::vector<ExpectedChunk> chunks(4);
  for (ExpectedChunk& c : chunks) {
    c.contributors.push_back({0, "dense"});
    if (rank1_contributes) c.contributors.push_back({1, "dense"});
    c.members = {0, 1};
  }
  return chunks;
}

TEST(JobTrackerTest, ARankFinishesItsStepWithItsLastChunksSyncDoneWhateverPathRecordedTheOthers) {
  Harness h(FourChunkPlans(true), FourChunkExpected(true));
  h.JoinAll();
  for (RankId r : {0, 1}) {
    ASSERT_TRUE(h.Stage(r, {Item(0, 0, "dense"), Item(0, 1, "dense"), Item(0, 2, "dense"),
                            Item(0, 3, "dense")})
                    .ok());
  }
  // Rank 0: two chunks in one report (the general path), then one at a time (the common case).
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 0), Done(0, 1)}).ok());
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 2)}).ok());
  EXPECT_EQ(h.tracker().rank_step(0), 0u);
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 3)}).ok());
  EXPECT_EQ(h.tracker().rank_step(0), 1u);
  // Rank 1: one at a time with a repeat among them (counted once), then two in one report.
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 3)}).ok());
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 3)}).ok());
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 0)}).ok());
  EXPECT_EQ(h.tracker().rank_step(1), 0u);
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 1), Done(0, 2)}).ok());
  EXPECT_EQ(h.tracker().rank_step(1), 1u);
  EXPECT_THAT(h.tracker().NoticesToHold(1), IsEmpty());
}

TEST(JobTrackerTest, SyncDonesReportedAheadCountOnceTheRankReachesTheirStep) {
  // Rank 1 only syncs: it acknowledges two of step 1's directives before finishing step 0, which
  // then leaves it at step 1 with two chunks to go.
  Harness h(FourChunkPlans(false), FourChunkExpected(false));
  h.JoinAll();
  for (Step s : {0, 1}) {
    ASSERT_TRUE(h.Stage(0, {Item(s, 0, "dense"), Item(s, 1, "dense"), Item(s, 2, "dense"),
                            Item(s, 3, "dense")})
                    .ok());
    ASSERT_TRUE(h.SyncDone(0, h.DoneItems(0, s)).ok());
  }
  ASSERT_TRUE(h.SyncDone(1, {Done(1, 0)}).ok());
  ASSERT_TRUE(h.SyncDone(1, {Done(1, 1)}).ok());
  for (ChunkId c = 0; c < 4; ++c) {
    EXPECT_EQ(h.tracker().rank_step(1), 0u) << "chunk " << c;
    ASSERT_TRUE(h.SyncDone(1, {Done(0, c)}).ok());
  }
  EXPECT_EQ(h.tracker().rank_step(1), 1u);
  ASSERT_TRUE(h.SyncDone(1, {Done(1, 2)}).ok());
  EXPECT_EQ(h.tracker().rank_step(1), 1u);
  ASSERT_TRUE(h.SyncDone(1, {Done(1, 3)}).ok());
  EXPECT_EQ(h.tracker().rank_step(1), 2u);
}

}  // namespace
}  // namespace psync::core::testing
