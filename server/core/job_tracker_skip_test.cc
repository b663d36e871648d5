// JobTracker scenario tests: all-rank skips, votes while forming, and skip disagreements.
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
// Skips

TEST(JobTrackerTest, StepSkippedByEveryRankAdvancesEveryRank) {
  Harness h(MoePlans(), MoeExpected());
  h.JoinAll();
  for (RankId r = 0; r < 3; ++r) {
    ASSERT_TRUE(h.Skip(r, 0, r == 0 ? "found_inf" : "grad norm").ok());
    EXPECT_THAT(h.deliveries(), IsEmpty());
    EXPECT_THAT(h.events(), ElementsAre(absl::StrCat("skip_vote g1 s0 r", r)));
    EXPECT_EQ(h.tracker().rank_step(r), 0u);
  }
  // A repeated vote changes nothing.
  const std::string before = h.State();
  ASSERT_TRUE(h.Skip(1, 0).ok());
  EXPECT_THAT(h.events(), IsEmpty());
  EXPECT_EQ(h.State(), before);

  ASSERT_TRUE(h.Skip(3, 0).ok());
  EXPECT_THAT(h.deliveries(), UnorderedElementsAre("r0 skipped g1 s0", "r1 skipped g1 s0",
                                                   "r2 skipped g1 s0", "r3 skipped g1 s0"));
  EXPECT_THAT(h.events(), ElementsAre("skip_vote g1 s0 r3", "step_skipped g1 s0"));
  EXPECT_EQ(h.out().events[1].detail, "found_inf");
  for (RankId r = 0; r < 4; ++r) EXPECT_EQ(h.tracker().rank_step(r), 1u);
  // A rank that re-attaches gets the StepSkipped again (it may have been lost with its Session).
  for (RankId r = 0; r < 4; ++r) {
    std::vector<std::string> pending;
    for (const Notice& n : h.tracker().NoticesToHold(r)) pending.push_back(NoticeText(n));
    EXPECT_THAT(pending, ElementsAre("skipped g1 s0")) << "rank " << r;
  }
  // The skipped step is closed; late skips are duplicates.
  h.ExpectRefused([&] { return h.Stage(2, {Item(0, 1, "dense")}); },
                  absl::StatusCode::kFailedPrecondition,
                  "items[0].step 0 was skipped by every rank");
  ASSERT_TRUE(h.Skip(2, 0).ok());
  EXPECT_THAT(h.events(), IsEmpty());
  h.RunStep(1);
  const std::vector<Step> steps = {0, 1};
  const std::vector<Step> skipped = {0};
  EXPECT_TRUE(h.checker().CheckComplete(1, steps, skipped).ok());
  h.ExpectRefused([&] { return h.Skip(0, 0, std::string(257, 'x')); },
                  absl::StatusCode::kInvalidArgument,
                  "reason must be at most 256 characters (got 257)");
}

TEST(JobTrackerTest, SkipVotesWhileFormingCountOnceTheLastRankVotes) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  ASSERT_TRUE(h.Join(0).ok());
  ASSERT_TRUE(h.Skip(0, 0).ok());
  ASSERT_TRUE(h.Join(1).ok());
  EXPECT_THAT(h.deliveries(), IsEmpty());
  ASSERT_TRUE(h.Skip(1, 0).ok());
  EXPECT_THAT(h.deliveries(), UnorderedElementsAre("r0 skipped g1 s0", "r1 skipped g1 s0"));
}

TEST(JobTrackerTest, SkipDisagreementAbortsTheGenerationInEitherOrder) {
  for (bool stage_first : {true, false}) {
    SCOPED_TRACE(stage_first ? "stage then skip" : "skip then stage");
    Harness h(TwoRankPlans(), TwoRankExpected());
    h.JoinAll();
    absl::Status status;
    if (stage_first) {
      ASSERT_TRUE(h.Stage(0, {Item(0, 0, "expert")}).ok());
      status = h.Skip(1, 0, "found_inf");
      EXPECT_EQ(status.message(),
                "skip disagreement at step 0: rank 1 skips (found_inf) but 1 check-ins were "
                "staged, first: rank 0 expert chunk 0");
    } else {
      ASSERT_TRUE(h.Skip(1, 0, "found_inf").ok());
      EXPECT_THAT(h.deliveries(), IsEmpty());
      status = h.Stage(0, {Item(0, 0, "expert")});
      EXPECT_EQ(status.message(),
                "skip disagreement at step 0: rank 0 staged while ranks [1] skip it (found_inf)");
    }
    EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
    EXPECT_THAT(h.deliveries(), UnorderedElementsAre("r0 abort g1 s0", "r1 abort g1 s0"));
    for (const Delivery& d : h.out().deliveries) {
      EXPECT_EQ(std::get<AbortNotice>(*d.notice).reason, status.message());
    }
    EXPECT_THAT(h.events(), ElementsAre("violation g1 s0", "abort g1 s0"));
    EXPECT_EQ(h.tracker().state(), JobState::kAborted);
    for (RankId r : {0, 1}) {
      std::vector<Notice> pending = h.tracker().NoticesToHold(r);
      ASSERT_EQ(pending.size(), 1u);
      EXPECT_EQ(NoticeText(pending[0]), "abort g1 s0");
    }
    // Every later call of this generation is ABORTED and changes nothing.
    const std::string aborted = absl::StrCat(
        "job 'job' generation 1 was aborted at step 0: ", status.message(), "; join again");
    h.ExpectRefused([&] { return h.Stage(1, {Item(0, 0, "dense")}); }, absl::StatusCode::kAborted,
                    aborted);
    h.ExpectRefused([&] { return h.Skip(0, 0); }, absl::StatusCode::kAborted, aborted);
    h.ExpectRefused([&] { return h.SyncDone(0, {Done(0, 0)}); }, absl::StatusCode::kAborted,
                    aborted);
    // A new Join starts generation 2, with no second abort notice.
    absl::StatusOr<JoinResult> joined = h.Join(1);
    ASSERT_TRUE(joined.ok());
    EXPECT_EQ(joined->generation, 2u);
    EXPECT_FALSE(joined->reconnect);
    EXPECT_THAT(h.deliveries(), IsEmpty());
    EXPECT_THAT(h.events(), ElementsAre("generation g2", "join g2 r1"));
    EXPECT_THAT(h.out().events[0].detail,
                StartsWith("rank 1 joined after abort (skip disagreement"));
    EXPECT_EQ(h.tracker().state(), JobState::kForming);
    // Rank 0 still speaks generation 1: stale.
    h.ExpectRefused([&] { return h.StageIn(0, 1, {Item(0, 0, "dense")}); },
                    absl::StatusCode::kFailedPrecondition,
                    "generation 1 is stale: job 'job' is at generation 2; join again");
    ASSERT_TRUE(h.Join(0).ok());
    EXPECT_EQ(h.tracker().state(), JobState::kRunning);
    h.RunStep(0);
    const std::vector<Step> steps = {0};
    EXPECT_TRUE(h.checker().CheckComplete(2, steps, {}).ok());
  }
}

TEST(JobTrackerTest, SkipAfterOwnCheckinIsADisagreementToo) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  EXPECT_EQ(h.Skip(0, 0).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(h.tracker().state(), JobState::kAborted);
}

TEST(JobTrackerTest, LateDuplicateWhileOthersSkipIsNotADisagreement) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  h.RunStep(0);
  ASSERT_TRUE(h.Skip(1, 1).ok());
  // A repeated check-in of step 0 is not a vote against skipping step 1.
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  EXPECT_THAT(h.events(), ElementsAre("duplicate g1 s0 c0 r0 dense"));
  EXPECT_EQ(h.tracker().state(), JobState::kRunning);
  ASSERT_TRUE(h.Skip(0, 1).ok());
  EXPECT_THAT(h.deliveries(), UnorderedElementsAre("r0 skipped g1 s1", "r1 skipped g1 s1"));
}

}  // namespace
}  // namespace psync::core::testing
