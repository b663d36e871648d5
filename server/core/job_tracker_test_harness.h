// The scenario harness of the JobTracker tests (job_tracker_*_test.cc): a Harness that drives one
// JobTracker and feeds every accepted input and every decision to an InvariantChecker built from
// the test's own plan, helpers that assert a refused call changed nothing, and the hand-written
// plans the tests share. Test-only; not thread-safe (one test thread); a Harness owns its tracker.
#ifndef PSYNC_SERVER_CORE_JOB_TRACKER_TEST_HARNESS_H_
#define PSYNC_SERVER_CORE_JOB_TRACKER_TEST_HARNESS_H_

#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/invariant_checker.h"
#include "server/core/job_tracker.h"
#include "server/core/test_util.h"

namespace psync::core::testing {

// The matchers every scenario test uses (the tests live in this namespace).
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

using Strings = std::vector<std::string>;

inline const absl::Time kStart = absl::FromUnixSeconds(1700000000);

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
    out_ = NewDecisions();
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
    out_ = NewDecisions();
    absl::Status status = tracker_.Stage(rank, generation, items, now_, &out_);
    if (status.ok()) checker_.OnStaged(rank, generation, items);
    Audit();
    return status;
  }
  absl::Status Skip(RankId rank, Step step, std::string reason = "found_inf") {
    return SkipIn(rank, tracker_.generation(), step, std::move(reason));
  }
  absl::Status SkipIn(RankId rank, uint64_t generation, Step step, std::string reason) {
    out_ = NewDecisions();
    absl::Status status = tracker_.Skip(rank, generation, step, reason, now_, &out_);
    Audit();
    return status;
  }
  absl::Status SyncDone(RankId rank, std::vector<SyncDoneItem> items) {
    return SyncDoneIn(rank, tracker_.generation(), std::move(items));
  }
  absl::Status SyncDoneIn(RankId rank, uint64_t generation, std::vector<SyncDoneItem> items) {
    out_ = NewDecisions();
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
    EXPECT_THAT(std::string(status.message()), ::testing::StartsWith(message));
    EXPECT_THAT(out_.deliveries, ::testing::IsEmpty());
    EXPECT_EQ(State(), before) << "a refused call changed the state";
  }

  // From now on, a release to every member is one Delivery::ToMembersOf, as the owner asks.
  void DeliverToMembersWhole() { whole_ = true; }

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
  Decisions NewDecisions() const {
    Decisions d;
    d.deliver_to_members_whole = whole_;
    return d;
  }
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
  bool whole_ = false;
};

// ---- Plans used below. Expected contributors and members are written out by hand. ----

// W=2, one chunk: both ranks stage dense and expert; dp = [0,1].
inline std::vector<RankPlan> TwoRankPlans(std::string incarnation = "i0") {
  std::vector<RankPlan> plans;
  for (RankId r : {0, 1}) {
    plans.push_back(
        Plan(r, 2, 1, {Part(0, {"dense", "expert"}, {Group("dp", {0, 1})})}, incarnation));
  }
  return plans;
}
inline std::vector<ExpectedChunk> TwoRankExpected() {
  return {{{{0, "dense"}, {0, "expert"}, {1, "dense"}, {1, "expert"}}, {0, 1}}};
}

// W=4, E=2: chunk 0 mixed (dp=[0,1,2,3] + edp0=[0,2] / edp1=[1,3]), chunk 1 dense-only (dp),
// chunk 2 expert-only (edp0 / edp1).
inline std::vector<RankPlan> MoePlans() {
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
inline std::vector<ExpectedChunk> MoeExpected() {
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

inline const SyncDirective& DirectiveAt(const Decisions& d, size_t i) {
  return std::get<SyncDirective>(*d.deliveries.at(i).notice);
}

}  // namespace psync::core::testing

#endif  // PSYNC_SERVER_CORE_JOB_TRACKER_TEST_HARNESS_H_
