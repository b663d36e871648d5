// JobTracker scenario tests: joins while the plan forms, plan conflicts, generations, reconnects,
// session checks and sequence numbers across generations.
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
// Plan incomplete

TEST(JobTrackerTest, IncompletePlanHoldsReleasesUntilTheLastRankJoins) {
  // Rank 2 syncs chunk 0 but contributes nothing to it: every contributor can stage before it
  // joins, yet nothing is released while the plan is incomplete.
  std::vector<RankPlan> plans;
  for (RankId r = 0; r < 3; ++r) {
    plans.push_back(
        Plan(r, 3, 1,
             {Part(0, r < 2 ? std::vector<std::string>{"dense"} : std::vector<std::string>{},
                   {Group("dp", {0, 1, 2})})}));
  }
  Harness h(plans, {{{{0, "dense"}, {1, "dense"}}, {0, 1, 2}}});
  ASSERT_TRUE(h.Join(0).ok());
  EXPECT_THAT(h.events(), ElementsAre("generation g1", "join g1 r0"));
  ASSERT_TRUE(h.Join(1).ok());
  EXPECT_EQ(h.tracker().state(), JobState::kForming);
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  h.Tick(absl::Seconds(2));
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense")}).ok());
  EXPECT_THAT(h.deliveries(), IsEmpty());
  EXPECT_THAT(h.events(), ElementsAre("checkin g1 s0 c0 r1 dense"));
  EXPECT_EQ(h.tracker().Snapshot(h.now()).chunks[0].state, "WAITING");
  // A step ahead is refused while forming, naming why.
  h.ExpectRefused([&] { return h.Stage(0, {Item(1, 0, "dense")}); },
                  absl::StatusCode::kFailedPrecondition,
                  "items[0].step 1: rank 0 has not finished step 0 (the job is still forming)");

  h.Tick(absl::Seconds(3));
  absl::StatusOr<JoinResult> joined = h.Join(2);
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(h.tracker().state(), JobState::kRunning);
  EXPECT_THAT(h.deliveries(),
              ElementsAre("r0 directive g1 s0 c0 seq1", "r1 directive g1 s0 c0 seq1",
                          "r2 directive g1 s0 c0 seq1"));
  EXPECT_THAT(h.events(), ElementsAre("join g1 r2", "release g1 s0 c0 r1 dense seq1"));
  EXPECT_EQ(DirectiveAt(h.out(), 0).wait, absl::Seconds(5));
}

TEST(JobTrackerTest, LastJoinerThatAddsContributorsKeepsTheChunkWaiting) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  ASSERT_TRUE(h.Join(0).ok());
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
  ASSERT_TRUE(h.Join(1).ok());
  EXPECT_THAT(h.deliveries(), IsEmpty());
  EXPECT_THAT(h.events(), ElementsAre("join g1 r1"));
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense")}).ok());
  EXPECT_THAT(h.deliveries(), IsEmpty());
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "expert")}).ok());
  EXPECT_THAT(h.deliveries(),
              ElementsAre("r0 directive g1 s0 c0 seq1", "r1 directive g1 s0 c0 seq1"));
}

TEST(JobTrackerTest, StageBeforeJoiningIsRefused) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  ASSERT_TRUE(h.Join(0).ok());
  h.ExpectRefused([&] { return h.Stage(1, {Item(0, 0, "dense")}); },
                  absl::StatusCode::kFailedPrecondition, "rank 1 has not joined generation 1");
  h.ExpectRefused([&] { return h.Skip(1, 0); }, absl::StatusCode::kFailedPrecondition,
                  "rank 1 has not joined generation 1");
}

TEST(JobTrackerTest, JoinConflictingWithTheMergedPlanIsRefusedAndChangesNothing) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  ASSERT_TRUE(h.Join(0).ok());
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  RankPlan bad = h.plan(1);
  bad.num_chunks = 2;
  const std::string before = h.State();
  absl::StatusOr<JoinResult> result = h.Join(bad);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(result.status().message(),
            "num_chunks 2 of rank 1 conflicts with 1 declared by rank 0");
  EXPECT_THAT(h.deliveries(), IsEmpty());
  EXPECT_THAT(h.events(), IsEmpty());
  EXPECT_EQ(h.State(), before);
  EXPECT_EQ(h.generation(), 1u);
}
// ---------------------------------------------------------------------------------------------
// Generations, reconnects, sessions

TEST(JobTrackerTest, StaleGenerationIsFailedPrecondition) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  // Older than the job's generation is stale; newer was never issued.
  const std::vector<std::pair<uint64_t, std::string>> cases = {
      {0, "generation 0 is stale: job 'job' is at generation 1; join again"},
      {2, "generation 2 is in the future (never issued): job 'job' is at generation 1; join again"},
  };
  for (const auto& c : cases) {
    // Plain variables, not a structured binding: the lambdas below capture them (clang refuses to
    // capture a structured binding).
    const uint64_t g = c.first;
    const std::string& message = c.second;
    SCOPED_TRACE(g);
    h.ExpectRefused([&] { return h.StageIn(1, g, {Item(0, 0, "dense")}); },
                    absl::StatusCode::kFailedPrecondition, message);
    h.ExpectRefused([&] { return h.SkipIn(1, g, 0, "x"); }, absl::StatusCode::kFailedPrecondition,
                    message);
    h.ExpectRefused([&] { return h.SyncDoneIn(1, g, {Done(0, 0)}); },
                    absl::StatusCode::kFailedPrecondition, message);
    EXPECT_EQ(h.tracker().CheckAttach(1, g, "whatever"), absl::FailedPreconditionError(message));
    EXPECT_EQ(h.tracker().CheckGeneration(g), absl::FailedPreconditionError(message));
  }
}

TEST(JobTrackerTest, ReconnectWithTheSameIncarnationKeepsGenerationAndSession) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  absl::StatusOr<JoinResult> first = h.Join(0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->generation, 1u);
  EXPECT_FALSE(first->reconnect);
  ASSERT_TRUE(h.Join(1).ok());
  h.RunStep(0);
  ASSERT_TRUE(h.Stage(0, {Item(1, 0, "dense")}).ok());
  const std::string before = h.State();
  absl::StatusOr<JoinResult> again = h.Join(0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->generation, 1u);
  EXPECT_EQ(again->session_id, first->session_id);
  EXPECT_EQ(again->next_step, 1u);
  EXPECT_TRUE(again->reconnect);
  EXPECT_THAT(h.deliveries(), IsEmpty());
  EXPECT_THAT(h.events(), ElementsAre("join g1 r0"));
  EXPECT_EQ(h.out().events[0].detail, "reconnect");
  EXPECT_EQ(h.State(), before);
  EXPECT_TRUE(h.tracker().CheckAttach(0, 1, first->session_id).ok());
  // The same incarnation with another plan is refused.
  RankPlan changed = h.plan(0);
  changed.chunks[0].optimizers = {"dense"};
  absl::StatusOr<JoinResult> refused = h.Join(changed);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "rank 0 joined again with incarnation 'i0' but a different plan "
            "(chunks[0].optimizers [dense,expert] -> [dense]); a changed plan needs a new "
            "incarnation");
  EXPECT_EQ(h.State(), before);
  // So is another membership of one of its groups (the plan keeps group members once per chunk).
  RankPlan regrouped = h.plan(0);
  ASSERT_FALSE(regrouped.chunks[0].groups.empty());
  regrouped.chunks[0].groups[0].ranks = {0};
  EXPECT_EQ(
      h.Join(regrouped).status(),
      absl::FailedPreconditionError(
          "rank 0 joined again with incarnation 'i0' but a different plan "
          "(chunks[0].groups[0].ranks [0,1] -> [0]); a changed plan needs a new incarnation"));
  // And a plan with another chunk count names it.
  RankPlan wider = h.plan(0);
  wider.num_chunks = 2;
  EXPECT_THAT(std::string(h.Join(wider).status().message()), HasSubstr("(num_chunks 1 -> 2)"));
  // Members listed in another order are the same plan.
  RankPlan reordered = h.plan(0);
  std::reverse(reordered.chunks[0].groups[0].ranks.begin(),
               reordered.chunks[0].groups[0].ranks.end());
  ASSERT_TRUE(h.Join(reordered).ok());
  EXPECT_EQ(h.State(), before);
}

TEST(JobTrackerTest, NewIncarnationStartsANewGenerationAndAbortsTheOldOne) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  h.RunStep(0);
  ASSERT_TRUE(h.Stage(0, {Item(1, 0, "dense")}).ok());
  RankPlan restarted = h.plan(1);
  restarted.incarnation = "i1";
  absl::StatusOr<JoinResult> joined = h.Join(restarted);
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->generation, 2u);
  EXPECT_FALSE(joined->reconnect);
  EXPECT_EQ(joined->next_step, 0u);
  EXPECT_EQ(h.tracker().state(), JobState::kForming);
  // Rank 0 (the other rank) is told; so is the old incarnation of rank 1.
  EXPECT_THAT(h.deliveries(), UnorderedElementsAre("r0 abort g1 s1", "r1 abort g1 s1"));
  for (const Delivery& d : h.out().deliveries) {
    EXPECT_EQ(std::get<AbortNotice>(*d.notice).reason,
              "rank 1 restarted (incarnation 'i0' -> 'i1'); join generation 2");
  }
  EXPECT_THAT(h.events(), ElementsAre("generation g2", "join g2 r1"));
  EXPECT_THAT(h.tracker().JoinedRanks(), ElementsAre(1));
  // The old generation's messages are stale; rank 0 re-joins with its own incarnation.
  h.ExpectRefused([&] { return h.StageIn(0, 1, {Item(1, 0, "expert")}); },
                  absl::StatusCode::kFailedPrecondition,
                  "generation 1 is stale: job 'job' is at generation 2; join again");
  absl::StatusOr<JoinResult> rejoined = h.Join(0);
  ASSERT_TRUE(rejoined.ok());
  EXPECT_EQ(rejoined->generation, 2u);
  EXPECT_FALSE(rejoined->reconnect);
  EXPECT_NE(rejoined->session_id, joined->session_id);
  EXPECT_THAT(h.deliveries(), IsEmpty());
  EXPECT_EQ(h.tracker().state(), JobState::kRunning);
  h.RunStep(0);
  EXPECT_THAT(h.deliveries(), IsEmpty());
  const std::vector<Step> steps = {0};
  EXPECT_TRUE(h.checker().CheckComplete(2, steps, {}).ok());
}

TEST(JobTrackerTest, CheckAttachValidatesRankGenerationAndSession) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  absl::StatusOr<JoinResult> joined = h.Join(0);
  ASSERT_TRUE(joined.ok());
  EXPECT_TRUE(h.tracker().CheckAttach(0, 1, joined->session_id).ok());
  EXPECT_EQ(h.tracker().CheckAttach(0, 1, "g1-r0-s9"),
            absl::PermissionDeniedError("session_id does not match the session issued to rank 0"));
  EXPECT_EQ(h.tracker().CheckAttach(1, 1, "x"),
            absl::FailedPreconditionError("rank 1 has not joined generation 1"));
  EXPECT_EQ(h.tracker().CheckAttach(2, 1, "x"),
            absl::InvalidArgumentError("rank 2 out of range [0, 2)"));
  EXPECT_EQ(h.tracker().CheckAttach(0, 2, joined->session_id),
            absl::FailedPreconditionError("generation 2 is in the future (never issued): job 'job' "
                                          "is at generation 1; join again"));
  // An empty session id is malformed, whatever else is wrong.
  EXPECT_EQ(h.tracker().CheckAttach(2, 7, ""),
            absl::InvalidArgumentError("session_id must not be empty"));
}

TEST(JobTrackerTest, SequenceNumbersIncreaseAcrossStepsChunksAndGenerations) {
  Harness h(MoePlans(), MoeExpected());
  h.JoinAll();
  h.RunStep(0);
  h.RunStep(1);
  EXPECT_EQ(h.checker().releases(), 6u);
  RankPlan restarted = h.plan(2);
  restarted.incarnation = "i1";
  ASSERT_TRUE(h.Join(restarted).ok());
  for (RankId r : {0, 1, 3}) ASSERT_TRUE(h.Join(r).ok());
  ASSERT_TRUE(h.Stage(0, {Item(0, 1, "dense")}).ok());
  ASSERT_TRUE(h.Stage(1, {Item(0, 1, "dense")}).ok());
  ASSERT_TRUE(h.Stage(2, {Item(0, 1, "dense")}).ok());
  ASSERT_TRUE(h.Stage(3, {Item(0, 1, "dense")}).ok());
  EXPECT_THAT(h.deliveries(),
              ElementsAre("r0 directive g2 s0 c1 seq7", "r1 directive g2 s0 c1 seq7",
                          "r2 directive g2 s0 c1 seq7", "r3 directive g2 s0 c1 seq7"));
}

}  // namespace
}  // namespace psync::core::testing
