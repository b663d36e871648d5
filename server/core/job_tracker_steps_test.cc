// JobTracker scenario tests: step ordering, the history window and the first step.
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
// Step ordering

TEST(JobTrackerTest, StepOrderingAndHistoryWindow) {
  TrackerOptions options;
  options.history_steps = 2;
  Harness h(TwoRankPlans(), TwoRankExpected(), options);
  h.JoinAll();
  // Rank 0 stages step 0; step 1 needs its SyncDone first.
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense", 1), Item(0, 0, "expert", 2)}).ok());
  h.ExpectRefused(
      [&] { return h.Stage(0, {Item(1, 0, "dense")}); }, absl::StatusCode::kFailedPrecondition,
      "items[0].step 1: rank 0 has not finished step 0 (SyncDone missing for chunks [0])");
  h.ExpectRefused([&] { return h.Stage(0, {Item(2, 0, "dense")}); }, absl::StatusCode::kOutOfRange,
                  "items[0].step 2 is too far ahead: rank 0 is at step 0");
  h.ExpectRefused([&] { return h.Skip(0, 1); }, absl::StatusCode::kFailedPrecondition,
                  "step 1: rank 0 has not finished step 0");
  h.ExpectRefused([&] { return h.Skip(0, 2); }, absl::StatusCode::kOutOfRange,
                  "step 2 is too far ahead: rank 0 is at step 0");
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
  ASSERT_TRUE(h.SyncDone(0, {Done(0, 0)}).ok());
  EXPECT_EQ(h.tracker().rank_step(0), 1u);
  // Rank 0 may stage step 1 now; rank 1 may not (it has not reported SyncDone).
  ASSERT_TRUE(h.Stage(0, {Item(1, 0, "dense")}).ok());
  h.ExpectRefused([&] { return h.Stage(1, {Item(1, 0, "dense")}); },
                  absl::StatusCode::kFailedPrecondition,
                  "items[0].step 1: rank 1 has not finished step 0");
  ASSERT_TRUE(h.SyncDone(1, {Done(0, 0)}).ok());
  ASSERT_TRUE(h.Stage(1, {Item(1, 0, "dense"), Item(1, 0, "expert")}).ok());
  ASSERT_TRUE(h.Stage(0, {Item(1, 0, "expert")}).ok());
  ASSERT_TRUE(h.SyncDone(0, {Done(1, 0)}).ok());
  ASSERT_TRUE(h.SyncDone(1, {Done(1, 0)}).ok());
  for (Step s = 2; s < 5; ++s) h.RunStep(s);
  // Both ranks are at step 5: steps 3 and 4 are retained, 0..2 are not.
  EXPECT_EQ(h.tracker().rank_step(0), 5u);
  EXPECT_EQ(h.tracker().rank_step(1), 5u);
  // A report of a step no longer retained, which the rank was at here and is past, is a late
  // repeat (its Ack lost with a connection): OK, a duplicate, nothing changes; its checksum can no
  // longer be compared.
  const std::string before = h.State();
  ASSERT_TRUE(h.Stage(0, {Item(2, 0, "dense")}).ok());
  EXPECT_THAT(h.events(), ElementsAre("duplicate g1 s2 c0 r0 dense"));
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense", 1)}).ok());
  EXPECT_THAT(h.events(), ElementsAre("duplicate g1 s0 c0 r0 dense"));
  ASSERT_TRUE(h.SyncDone(0, {Done(2, 0)}).ok());
  EXPECT_THAT(h.events(), IsEmpty());
  EXPECT_THAT(h.deliveries(), IsEmpty());
  EXPECT_EQ(h.State(), before);
  // A step the rank has not finished is judged as before, retained or not.
  h.ExpectRefused([&] { return h.Stage(0, {Item(7, 0, "dense")}); }, absl::StatusCode::kOutOfRange,
                  "items[0].step 7 is too far ahead: rank 0 is at step 5");
  // A skip vote of such a step too (its answer lost; a rank that voted moves past a step only once
  // it is skipped): OK, nothing changes.
  ASSERT_TRUE(h.Skip(0, 2).ok());
  EXPECT_THAT(h.events(), IsEmpty());
  EXPECT_EQ(h.State(), before);
  // Late duplicates within the window get the decision already made.
  ASSERT_TRUE(h.Stage(0, {Item(3, 0, "dense")}).ok());
  EXPECT_THAT(h.events(), ElementsAre("duplicate g1 s3 c0 r0 dense"));
  EXPECT_THAT(h.deliveries(), IsEmpty());
  ASSERT_TRUE(h.SyncDone(1, h.DoneItems(1, 4)).ok());
  EXPECT_THAT(h.events(), IsEmpty());
  EXPECT_THAT(h.deliveries(), IsEmpty());
  EXPECT_EQ(h.State(), before);
  // A late conflicting one is still a conflict.
  h.ExpectRefused([&] { return h.Stage(0, {Item(4, 0, "dense", 99)}); },
                  absl::StatusCode::kAlreadyExists,
                  "items[0]: step 4 chunk 0 rank 0 dense already staged with shard_checksum none, "
                  "now 0x63");
  h.ExpectRefused(
      [&] {
        return h.SyncDone(1, {Done(4, 0, {{"dp", 1}})});
      },
      absl::StatusCode::kAlreadyExists,
      "items[0]: rank 1 already reported SyncDone for step 4 chunk 0 with checksums "
      "{dp:0xfa0}");
  EXPECT_THAT(h.events(), ElementsAre("violation g1 s4 c0 r1"));
}

TEST(JobTrackerTest, FirstStepIsWhereRanksStart) {
  std::vector<RankPlan> plans;
  for (RankId r : {0, 1}) {
    plans.push_back(Plan(r, 2, 1, {Part(0, {"dense"}, {Group("dp", {0, 1})})}, "i0", 100));
  }
  Harness h(plans, {{{{0, "dense"}, {1, "dense"}}, {0, 1}}});
  absl::StatusOr<JoinResult> joined = h.Join(0);
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->next_step, 100u);
  ASSERT_TRUE(h.Join(1).ok());
  h.ExpectRefused([&] { return h.Stage(0, {Item(99, 0, "dense")}); }, absl::StatusCode::kOutOfRange,
                  "items[0].step 99 is before the oldest retained step 100");
  h.ExpectRefused([&] { return h.Skip(0, 99); }, absl::StatusCode::kOutOfRange,
                  "step 99 is before the oldest retained step 100");
  h.RunStep(100);
  h.RunStep(101);
  EXPECT_EQ(h.tracker().rank_step(1), 102u);
  const std::vector<Step> steps = {100, 101};
  EXPECT_TRUE(h.checker().CheckComplete(1, steps, {}).ok());
}

}  // namespace
}  // namespace psync::core::testing
