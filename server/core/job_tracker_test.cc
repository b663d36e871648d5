// Scenario and table-driven tests of every rule in the contract atop job_tracker.h. Each test
// drives a JobTracker through a Harness that feeds every accepted input and every decision to an
// InvariantChecker built from the test's own plan, and compares exact decisions (deliveries to
// ranks, events, sequence numbers, status codes). "State unchanged" is asserted by comparing the
// rendering of Snapshot() and every rank's Pending() before and after a rejected call.
#include "server/core/job_tracker.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/invariant_checker.h"
#include "server/core/test_util.h"

namespace psync::core {
namespace {

using ::psync::core::testing::DeliveryTexts;
using ::psync::core::testing::Done;
using ::psync::core::testing::EventsOf;
using ::psync::core::testing::EventTexts;
using ::psync::core::testing::Group;
using ::psync::core::testing::Item;
using ::psync::core::testing::NoticeText;
using ::psync::core::testing::Part;
using ::psync::core::testing::Plan;
using ::psync::core::testing::StateText;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

using Strings = std::vector<std::string>;

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

// Drives one JobTracker; audits everything with an InvariantChecker built from `expected`.
class Harness {
 public:
  Harness(std::vector<RankPlan> plans, std::vector<ExpectedChunk> expected,
          TrackerOptions options = TrackerOptions())
      : plans_(std::move(plans)),
        expected_(expected),
        tracker_("job", options),
        checker_(std::move(expected)) {}

  absl::StatusOr<JoinResult> Join(const RankPlan& plan) {
    out_ = Decisions();
    absl::StatusOr<JoinResult> result = tracker_.Join(plan, now_, &out_);
    Audit();
    return result;
  }
  absl::StatusOr<JoinResult> Join(RankId rank) { return Join(plans_[rank]); }
  void JoinAll() {
    for (const RankPlan& plan : plans_) {
      absl::StatusOr<JoinResult> result = Join(plan);
      ASSERT_TRUE(result.ok()) << result.status();
    }
  }

  absl::Status Stage(RankId rank, std::vector<StagedItem> items) {
    return StageIn(rank, tracker_.generation(), std::move(items));
  }
  absl::Status StageIn(RankId rank, uint64_t generation, std::vector<StagedItem> items) {
    out_ = Decisions();
    absl::Status status = tracker_.Stage(rank, generation, items, now_, &out_);
    if (status.ok()) checker_.OnStaged(rank, generation, items);
    Audit();
    return status;
  }
  absl::Status Skip(RankId rank, Step step, std::string reason = "found_inf") {
    return SkipIn(rank, tracker_.generation(), step, std::move(reason));
  }
  absl::Status SkipIn(RankId rank, uint64_t generation, Step step, std::string reason) {
    out_ = Decisions();
    absl::Status status = tracker_.Skip(rank, generation, step, reason, now_, &out_);
    Audit();
    return status;
  }
  absl::Status SyncDone(RankId rank, std::vector<SyncDoneItem> items) {
    return SyncDoneIn(rank, tracker_.generation(), std::move(items));
  }
  absl::Status SyncDoneIn(RankId rank, uint64_t generation, std::vector<SyncDoneItem> items) {
    out_ = Decisions();
    absl::Status status = tracker_.SyncDone(rank, generation, items, now_, &out_);
    Audit();
    return status;
  }

  // Every rank stages all it declared for `step`, in one batch each, then every member reports
  // SyncDone (with agreeing checksums) for every chunk that has contributors.
  void RunStep(Step step) {
    for (const RankPlan& plan : plans_) {
      std::vector<StagedItem> items;
      for (const ChunkPart& part : plan.chunks) {
        for (const std::string& opt : part.optimizers) items.push_back(Item(step, part.chunk, opt));
      }
      if (items.empty()) continue;
      absl::Status status = Stage(plan.rank, items);
      ASSERT_TRUE(status.ok()) << "rank " << plan.rank << " step " << step << ": " << status;
    }
    for (const RankPlan& plan : plans_) {
      std::vector<SyncDoneItem> items = DoneItems(plan.rank, step);
      if (items.empty()) continue;
      absl::Status status = SyncDone(plan.rank, items);
      ASSERT_TRUE(status.ok()) << "rank " << plan.rank << " step " << step << ": " << status;
    }
  }
  // The SyncDone items of `rank` for every chunk it syncs at `step`, checksums agreeing.
  std::vector<SyncDoneItem> DoneItems(RankId rank, Step step) const {
    std::vector<SyncDoneItem> items;
    for (const ChunkPart& part : plans_[rank].chunks) {
      if (expected_[part.chunk].contributors.empty()) continue;
      std::vector<GroupChecksum> sums;
      for (const GroupDecl& g : part.groups) sums.push_back({g.name, 1000 * step + part.chunk});
      items.push_back(Done(step, part.chunk, sums));
    }
    return items;
  }

  // Calls `call`, expects it to be refused with `code` and a message starting with `message`,
  // no deliveries, and the observable state unchanged.
  void ExpectRefused(const std::function<absl::Status()>& call, absl::StatusCode code,
                     const std::string& message) {
    const std::string before = State();
    const absl::Status status = call();
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_THAT(std::string(status.message()), StartsWith(message));
    EXPECT_THAT(out_.deliveries, IsEmpty());
    EXPECT_EQ(State(), before) << "a refused call changed the state";
  }

  std::string State() const { return StateText(tracker_, now_); }
  Strings deliveries() const { return DeliveryTexts(out_); }
  Strings events() const { return EventTexts(out_); }
  const Decisions& out() const { return out_; }
  void Tick(absl::Duration d) { now_ += d; }
  absl::Time now() const { return now_; }
  uint64_t generation() const { return tracker_.generation(); }
  const RankPlan& plan(RankId rank) const { return plans_[rank]; }
  JobTracker& tracker() { return tracker_; }
  InvariantChecker& checker() { return checker_; }

 private:
  void Audit() {
    const absl::Status status = checker_.OnDecisions(out_);
    EXPECT_TRUE(status.ok()) << status;
  }

  const std::vector<RankPlan> plans_;
  const std::vector<ExpectedChunk> expected_;
  absl::Time now_ = kStart;
  JobTracker tracker_;
  InvariantChecker checker_;
  Decisions out_;
};

// ---- Plans used below. Expected contributors and members are written out by hand. ----

// W=2, one chunk: both ranks stage dense and expert; dp = [0,1].
std::vector<RankPlan> TwoRankPlans(std::string incarnation = "i0") {
  std::vector<RankPlan> plans;
  for (RankId r : {0, 1}) {
    plans.push_back(
        Plan(r, 2, 1, {Part(0, {"dense", "expert"}, {Group("dp", {0, 1})})}, incarnation));
  }
  return plans;
}
std::vector<ExpectedChunk> TwoRankExpected() {
  return {{{{0, "dense"}, {0, "expert"}, {1, "dense"}, {1, "expert"}}, {0, 1}}};
}

// W=4, E=2: chunk 0 mixed (dp=[0,1,2,3] + edp0=[0,2] / edp1=[1,3]), chunk 1 dense-only (dp),
// chunk 2 expert-only (edp0 / edp1).
std::vector<RankPlan> MoePlans() {
  std::vector<RankPlan> plans;
  for (RankId r = 0; r < 4; ++r) {
    const std::string edp = absl::StrCat("edp", r % 2);
    const std::vector<RankId> edp_ranks = {r % 2, r % 2 + 2};
    plans.push_back(
        Plan(r, 4, 3,
             {Part(0, {"dense", "expert"}, {Group("dp", {0, 1, 2, 3}), Group(edp, edp_ranks)}),
              Part(1, {"dense"}, {Group("dp", {0, 1, 2, 3})}),
              Part(2, {"expert"}, {Group(edp, edp_ranks)})}));
  }
  return plans;
}
std::vector<ExpectedChunk> MoeExpected() {
  std::vector<ExpectedChunk> chunks(3);
  for (RankId r = 0; r < 4; ++r) {
    chunks[0].contributors.push_back({r, "dense"});
    chunks[0].contributors.push_back({r, "expert"});
    chunks[1].contributors.push_back({r, "dense"});
    chunks[2].contributors.push_back({r, "expert"});
    for (ExpectedChunk& c : chunks) c.members.push_back(r);
  }
  return chunks;
}

const SyncDirective& DirectiveAt(const Decisions& d, size_t i) {
  return std::get<SyncDirective>(d.deliveries.at(i).notice);
}

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
      }
      EXPECT_EQ(EventsOf(h.out(), EventKind::kRelease)[0].detail,
                absl::StrCat("all 4 contributors staged; last rank ", c.rank, " ", c.optimizer,
                             "; directive to 2 ranks"));
    }
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(orders, 24);
}

TEST(JobTrackerTest, ABatchCompletingSeveralChunksReleasesEachOnceInChunkOrder) {
  Harness h(MoePlans(), MoeExpected());
  h.JoinAll();
  for (RankId r = 0; r < 3; ++r) {
    ASSERT_TRUE(h.Stage(r, {Item(0, 2, "expert"), Item(0, 0, "dense"), Item(0, 0, "expert"),
                            Item(0, 1, "dense")})
                    .ok());
    EXPECT_THAT(h.deliveries(), IsEmpty());
  }
  ASSERT_TRUE(h.Stage(3, {Item(0, 2, "expert"), Item(0, 0, "dense"), Item(0, 0, "expert"),
                          Item(0, 1, "dense")})
                  .ok());
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

// ---------------------------------------------------------------------------------------------
// Duplicates

TEST(JobTrackerTest, DuplicateCheckinIsAnsweredIdempotently) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense", 7)}).ok());
  const std::string before = h.State();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense", 7)}).ok());
  EXPECT_THAT(h.deliveries(), IsEmpty());
  EXPECT_THAT(h.events(), ElementsAre("duplicate g1 s0 c0 r0 dense"));
  EXPECT_EQ(h.State(), before);

  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "expert")}).ok());
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
  ASSERT_EQ(h.out().deliveries.size(), 2u);
  // After the release: duplicates, alone or with each other, release nothing again.
  for (RankId r : {0, 1}) {
    ASSERT_TRUE(h.Stage(r, {Item(0, 0, "expert")}).ok());
    EXPECT_THAT(h.deliveries(), IsEmpty());
    EXPECT_THAT(h.events(), ElementsAre(absl::StrCat("duplicate g1 s0 c0 r", r, " expert")));
  }
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "expert"), Item(0, 0, "dense")}).ok());
  EXPECT_THAT(h.deliveries(), IsEmpty());
  EXPECT_THAT(h.events(),
              ElementsAre("duplicate g1 s0 c0 r1 expert", "duplicate g1 s0 c0 r1 dense"));
  EXPECT_EQ(h.checker().releases(), 1u);
}

TEST(JobTrackerTest, MixedBatchOfDuplicatesAndFreshItemsAppliesTheFreshOnes) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
  EXPECT_THAT(h.events(), ElementsAre("duplicate g1 s0 c0 r0 dense", "checkin g1 s0 c0 r0 expert",
                                      "release g1 s0 c0 r0 expert seq1"));
  EXPECT_EQ(h.out().deliveries.size(), 2u);
}

TEST(JobTrackerTest, ConflictingDuplicateIsAlreadyExistsWithAViolationAndNoStateChange) {
  struct Case {
    std::optional<uint64_t> first;
    std::optional<uint64_t> second;
    std::string message;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {7, 8,
       "items[0]: step 0 chunk 0 rank 0 dense already staged with shard_checksum 0x7, now 0x8",
       "conflicting duplicate check-in: shard_checksum 0x8 after 0x7"},
      {7, std::nullopt,
       "items[0]: step 0 chunk 0 rank 0 dense already staged with shard_checksum 0x7, now none",
       "conflicting duplicate check-in: shard_checksum none after 0x7"},
      {std::nullopt, 7,
       "items[0]: step 0 chunk 0 rank 0 dense already staged with shard_checksum none, now 0x7",
       "conflicting duplicate check-in: shard_checksum 0x7 after none"},
  };
  for (bool released : {false, true}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(c.message, released ? " (after release)" : ""));
      Harness h(TwoRankPlans(), TwoRankExpected());
      h.JoinAll();
      ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense", c.first)}).ok());
      if (released) {
        ASSERT_TRUE(h.Stage(0, {Item(0, 0, "expert")}).ok());
        ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
      }
      h.ExpectRefused([&] { return h.Stage(0, {Item(0, 0, "dense", c.second)}); },
                      absl::StatusCode::kAlreadyExists, c.message);
      EXPECT_THAT(h.events(), ElementsAre("violation g1 s0 c0 r0 dense"));
      EXPECT_EQ(h.out().events[0].detail, c.detail);
      // The recorded checksum is still the first one.
      ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense", c.first)}).ok());
      EXPECT_THAT(h.events(), ElementsAre("duplicate g1 s0 c0 r0 dense"));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Batch atomicity and malformed input

TEST(JobTrackerTest, BatchWithOneBadItemAppliesNothing) {
  struct Case {
    std::string name;
    StagedItem bad;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"unknown chunk", Item(0, 1, "expert"), absl::StatusCode::kInvalidArgument,
       "items[1].chunk 1 out of range [0, 1)"},
      {"undeclared optimizer", Item(0, 0, "router"), absl::StatusCode::kInvalidArgument,
       "items[1].optimizer 'router' is not declared by rank 0 for chunk 0 (declared: "
       "[dense,expert])"},
      {"step ahead", Item(1, 0, "expert"), absl::StatusCode::kFailedPrecondition,
       "items[1].step 1: rank 0 has not finished step 0 (SyncDone missing for chunks [0])"},
      {"step far ahead", Item(2, 0, "expert"), absl::StatusCode::kOutOfRange,
       "items[1].step 2 is too far ahead: rank 0 is at step 0"},
      {"repeated item", Item(0, 0, "dense"), absl::StatusCode::kInvalidArgument,
       "items[1] repeats an earlier item (step 0 chunk 0 dense)"},
      {"conflicting duplicate", Item(0, 0, "expert", 9), absl::StatusCode::kAlreadyExists,
       "items[1]: step 0 chunk 0 rank 0 expert already staged with shard_checksum 0x5, now 0x9"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Harness h(TwoRankPlans(), TwoRankExpected());
    h.JoinAll();
    // Everything but rank 0's dense is staged: a good first item would release the chunk.
    ASSERT_TRUE(h.Stage(0, {Item(0, 0, "expert", 5)}).ok());
    ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
    h.ExpectRefused([&] { return h.Stage(0, {Item(0, 0, "dense"), c.bad}); }, c.code, c.message);
    if (c.code == absl::StatusCode::kAlreadyExists) {
      EXPECT_THAT(h.events(), ElementsAre("violation g1 s0 c0 r0 expert"));
    } else {
      EXPECT_THAT(h.events(), IsEmpty());
    }
    // The good item was not applied: it is fresh now, and releases.
    ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
    EXPECT_THAT(h.events(),
                ElementsAre("checkin g1 s0 c0 r0 dense", "release g1 s0 c0 r0 dense seq1"));
  }
}

TEST(JobTrackerTest, RepeatedItemIsFoundInSmallAndLargeBatches) {
  // One rank, 20 chunks: a batch of 20 distinct valid check-ins plus one repeat is compared
  // through a hash set, a batch of 3 pairwise; both name the repeat and apply nothing.
  constexpr ChunkId kChunks = 20;
  std::vector<ChunkPart> parts;
  std::vector<ExpectedChunk> expected;
  for (ChunkId c = 0; c < kChunks; ++c) {
    parts.push_back(Part(c, {"dense"}, {Group("dp", {0})}));
    expected.push_back({{{0, "dense"}}, {0}});
  }
  Harness h({Plan(0, 1, kChunks, parts)}, expected);
  h.JoinAll();
  std::vector<StagedItem> large;
  for (ChunkId c = 0; c < kChunks; ++c) large.push_back(Item(0, c, "dense"));
  large.push_back(Item(0, 3, "dense"));
  h.ExpectRefused([&] { return h.Stage(0, large); }, absl::StatusCode::kInvalidArgument,
                  "items[20] repeats an earlier item (step 0 chunk 3 dense)");
  h.ExpectRefused([&] { return h.Stage(0, {Item(0, 1, "dense"), Item(0, 2, "dense"),
                                            Item(0, 1, "dense")}); },
                  absl::StatusCode::kInvalidArgument,
                  "items[2] repeats an earlier item (step 0 chunk 1 dense)");
  EXPECT_THAT(h.events(), IsEmpty());
  large.pop_back();
  ASSERT_TRUE(h.Stage(0, large).ok());
  EXPECT_EQ(h.deliveries().size(), kChunks);
}

TEST(JobTrackerTest, BatchSizeIsBounded) {
  TrackerOptions options;
  options.max_batch_items = 1;
  Harness h(TwoRankPlans(), TwoRankExpected(), options);
  h.JoinAll();
  h.ExpectRefused([&] { return h.Stage(0, {}); }, absl::StatusCode::kInvalidArgument,
                  "items must have 1..1 entries (got 0)");
  h.ExpectRefused(
      [&] {
        return h.Stage(0, {Item(0, 0, "dense"), Item(0, 0, "expert")});
      },
      absl::StatusCode::kInvalidArgument, "items must have 1..1 entries (got 2)");
  h.ExpectRefused([&] { return h.SyncDone(0, {}); }, absl::StatusCode::kInvalidArgument,
                  "items must have 1..1 entries (got 0)");
}

TEST(JobTrackerTest, UnknownChunkAndUndeclaredOptimizerNameTheItem) {
  struct Case {
    std::vector<StagedItem> items;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{Item(0, 3, "dense")}, "items[0].chunk 3 out of range [0, 3)"},
      {{Item(0, 1, "dense"), Item(0, 7, "dense")}, "items[1].chunk 7 out of range [0, 3)"},
      {{Item(0, 1, "expert")}, "items[0].optimizer 'expert' is not declared by rank 0 for chunk 1"},
      {{Item(0, 0, "dense"), Item(0, 2, "dense")},
       "items[1].optimizer 'dense' is not declared by rank 0 for chunk 2 (declared: [expert])"},
      {{Item(0, 0, "dense"), Item(0, 1, "dense"), Item(0, 0, "")},
       "items[2].optimizer '' is not declared"},
  };
  Harness h(MoePlans(), MoeExpected());
  h.JoinAll();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    h.ExpectRefused([&] { return h.Stage(0, c.items); }, absl::StatusCode::kInvalidArgument,
                    c.message);
  }
  h.ExpectRefused([&] { return h.SyncDone(0, {Done(0, 3)}); }, absl::StatusCode::kInvalidArgument,
                  "items[0].chunk 3 out of range [0, 3)");
}

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
  h.ExpectRefused([&] { return h.Stage(0, {Item(2, 0, "dense")}); }, absl::StatusCode::kOutOfRange,
                  "items[0].step 2 is before the oldest retained step 3");
  h.ExpectRefused([&] { return h.Stage(0, {Item(0, 0, "dense", 1)}); },
                  absl::StatusCode::kOutOfRange,
                  "items[0].step 0 is before the oldest retained step 3");
  h.ExpectRefused([&] { return h.SyncDone(0, {Done(2, 0)}); }, absl::StatusCode::kOutOfRange,
                  "items[0].step 2 is before the oldest retained step 3");
  h.ExpectRefused([&] { return h.Skip(0, 2); }, absl::StatusCode::kOutOfRange,
                  "step 2 is before the oldest retained step 3");
  // Late duplicates within the window get the decision already made.
  const std::string before = h.State();
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
  h.RunStep(100);
  h.RunStep(101);
  EXPECT_EQ(h.tracker().rank_step(1), 102u);
  const std::vector<Step> steps = {100, 101};
  EXPECT_TRUE(h.checker().CheckComplete(1, steps, {}).ok());
}

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
    for (const Notice& n : h.tracker().Pending(r)) pending.push_back(NoticeText(n));
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
      EXPECT_EQ(std::get<AbortNotice>(d.notice).reason, status.message());
    }
    EXPECT_THAT(h.events(), ElementsAre("violation g1 s0", "abort g1 s0"));
    EXPECT_EQ(h.tracker().state(), JobState::kAborted);
    for (RankId r : {0, 1}) {
      std::vector<Notice> pending = h.tracker().Pending(r);
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

// ---------------------------------------------------------------------------------------------
// Generations, reconnects, sessions

TEST(JobTrackerTest, StaleGenerationIsFailedPrecondition) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  for (uint64_t g : {0, 2}) {
    SCOPED_TRACE(g);
    const std::string message =
        absl::StrCat("generation ", g, " is stale: job 'job' is at generation 1; join again");
    h.ExpectRefused([&] { return h.StageIn(1, g, {Item(0, 0, "dense")}); },
                    absl::StatusCode::kFailedPrecondition, message);
    h.ExpectRefused([&] { return h.SkipIn(1, g, 0, "x"); }, absl::StatusCode::kFailedPrecondition,
                    message);
    h.ExpectRefused([&] { return h.SyncDoneIn(1, g, {Done(0, 0)}); },
                    absl::StatusCode::kFailedPrecondition, message);
    EXPECT_EQ(h.tracker().CheckAttach(1, g, "whatever").code(),
              absl::StatusCode::kFailedPrecondition);
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
            "rank 0 joined again with incarnation 'i0' but a different plan; a changed plan needs "
            "a new incarnation");
  EXPECT_EQ(h.State(), before);
  // So is another membership of one of its groups (the plan keeps group members once per chunk).
  RankPlan regrouped = h.plan(0);
  ASSERT_FALSE(regrouped.chunks[0].groups.empty());
  regrouped.chunks[0].groups[0].ranks = {0};
  EXPECT_EQ(h.Join(regrouped).status().code(), absl::StatusCode::kFailedPrecondition);
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
    EXPECT_EQ(std::get<AbortNotice>(d.notice).reason,
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
  EXPECT_EQ(h.tracker().CheckAttach(0, 1, "g1-r0-s9").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(h.tracker().CheckAttach(1, 1, "").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(h.tracker().CheckAttach(2, 1, "").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.tracker().CheckAttach(0, 2, joined->session_id).code(),
            absl::StatusCode::kFailedPrecondition);
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

// ---------------------------------------------------------------------------------------------
// Pending and Snapshot

TEST(JobTrackerTest, PendingRelistsDirectivesUntilSyncDone) {
  Harness h(MoePlans(), MoeExpected());
  h.JoinAll();
  for (RankId r = 0; r < 4; ++r) EXPECT_THAT(h.tracker().Pending(r), IsEmpty());
  for (RankId r = 0; r < 4; ++r) ASSERT_TRUE(h.Stage(r, {Item(0, 1, "dense")}).ok());
  for (RankId r = 0; r < 4; ++r) ASSERT_TRUE(h.Stage(r, {Item(0, 2, "expert")}).ok());
  auto pending = [&](RankId r) {
    Strings out;
    for (const Notice& n : h.tracker().Pending(r)) out.push_back(NoticeText(n));
    return out;
  };
  for (RankId r = 0; r < 4; ++r) {
    EXPECT_THAT(pending(r), ElementsAre("directive g1 s0 c1 seq1", "directive g1 s0 c2 seq2"));
  }
  const SyncDirective first = std::get<SyncDirective>(h.tracker().Pending(0)[0]);
  EXPECT_EQ(first.last, (Contributor{3, "dense"}));
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
  for (const Notice& n : h.tracker().Pending(1)) pending.push_back(NoticeText(n));
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
  EXPECT_THAT(h.tracker().Pending(1), IsEmpty());
}

}  // namespace
}  // namespace psync::core
