#include "sim/recorder.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace psync::sim {
namespace {

// A clock the test moves by hand.
struct FakeClock {
  int64_t now = 0;
};

psync::v1::SyncDirective Directive(uint64_t step, uint32_t chunk, uint64_t sequence) {
  psync::v1::SyncDirective d;
  d.set_generation(1);
  d.set_step(step);
  d.set_chunk(chunk);
  d.set_sequence(sequence);
  return d;
}

// Two ranks, one chunk with dense and expert parameters: 4 contributors, 2 members.
SimPlan TwoRanks() {
  SimPlan plan;
  plan.world_size = 2;
  plan.num_chunks = 1;
  plan.expert_parallel = 1;
  return plan;
}

class RecorderTest : public ::testing::Test {
 protected:
  RecorderTest() : recorder_([this] { return clock_.now; }) {}

  void StageAll(uint64_t step) {
    for (uint32_t r = 0; r < 2; ++r) {
      for (const char* o : {"dense", "expert"}) {
        clock_.now += 1000;
        recorder_.CheckinSent(step, 0, r, o, false);
      }
    }
  }

  void Deliver(uint32_t rank, const psync::v1::SyncDirective& d, bool take = true) {
    clock_.now += 500;
    recorder_.DirectiveArrived(rank, d);
    if (take) recorder_.DirectiveTaken(rank, d);
  }

  bool HasViolation(const SimReport& report, const std::string& needle) {
    for (const std::string& v : report.violations) {
      if (absl::StrContains(v, needle)) return true;
    }
    return false;
  }

  FakeClock clock_;
  Recorder recorder_;
};

TEST_F(RecorderTest, CleanRunHasNoViolations) {
  StageAll(0);
  recorder_.CheckinSent(0, 0, 1, "dense", true);  // a duplicate changes nothing
  Deliver(0, Directive(0, 0, 1));
  Deliver(1, Directive(0, 0, 1));
  recorder_.ClientCounters(0, 3, 1, 2);
  recorder_.ClientCounters(1, 0, 1, 0);
  const SimReport report = recorder_.Analyze(TwoRanks(), 0, 1, {});
  EXPECT_TRUE(report.violations.empty()) << report.violations.front();
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.checkins_sent, 4u);
  EXPECT_EQ(report.duplicates_sent, 1u);
  EXPECT_EQ(report.releases, 1u);
  EXPECT_EQ(report.expected_releases, 1u);
  EXPECT_EQ(report.directives_received, 2u);
  EXPECT_EQ(report.duplicate_directives_dropped, 3u);
  EXPECT_EQ(report.reconnects, 2u);
  EXPECT_EQ(report.messages_resent, 2u);
  EXPECT_EQ(report.directives_per_rank, (std::vector<uint64_t>{1, 1}));
  ASSERT_EQ(report.steps.size(), 1u);
  const StepRow& row = report.steps[0];
  EXPECT_EQ(row.chunks_released, 1u);
  // Last send at 4000 ns, last arrival at 5000 ns.
  EXPECT_EQ(row.latency_max, absl::Nanoseconds(1000));
  EXPECT_EQ(row.latency_p50, absl::Nanoseconds(1000));
  EXPECT_EQ(row.slowest.rank, 1u);
  EXPECT_EQ(row.slowest.optimizer, "expert");
  EXPECT_EQ(row.slowest_lag, absl::Nanoseconds(3000));
}

TEST_F(RecorderTest, DetectsEarlyRelease) {
  clock_.now = 1000;
  recorder_.CheckinSent(0, 0, 0, "dense", false);
  recorder_.CheckinSent(0, 0, 0, "expert", false);
  recorder_.CheckinSent(0, 0, 1, "dense", false);
  Deliver(0, Directive(0, 0, 1));  // before rank 1's expert optimizer sent
  clock_.now += 100;
  recorder_.CheckinSent(0, 0, 1, "expert", false);
  Deliver(1, Directive(0, 0, 1));
  const SimReport report = recorder_.Analyze(TwoRanks(), 0, 1, {});
  EXPECT_TRUE(HasViolation(report, "early release: the directive reached rank 0"))
      << FormatReport(report);
  EXPECT_TRUE(HasViolation(report, "before r1/expert sent")) << FormatReport(report);
  EXPECT_FALSE(report.ok());
}

TEST_F(RecorderTest, DetectsReleaseWithAContributorThatNeverSent) {
  recorder_.CheckinSent(0, 0, 0, "dense", false);
  Deliver(0, Directive(0, 0, 1));
  Deliver(1, Directive(0, 0, 1));
  const SimReport report = recorder_.Analyze(TwoRanks(), 0, 1, {});
  EXPECT_TRUE(HasViolation(report, "never sent a check-in")) << FormatReport(report);
}

TEST_F(RecorderTest, DetectsDuplicateAndMissingDeliveries) {
  StageAll(0);
  Deliver(0, Directive(0, 0, 1));
  Deliver(0, Directive(0, 0, 1), /*take=*/false);
  const SimReport report = recorder_.Analyze(TwoRanks(), 0, 1, {});
  EXPECT_TRUE(HasViolation(report, "rank 0 received the directive 2 times"))
      << FormatReport(report);
  EXPECT_TRUE(HasViolation(report, "rank 1 received the directive 0 times"))
      << FormatReport(report);
  EXPECT_EQ(report.releases, 0u);
  EXPECT_FALSE(report.ok());
}

TEST_F(RecorderTest, DetectsDoubleHandOut) {
  StageAll(0);
  Deliver(0, Directive(0, 0, 1));
  Deliver(1, Directive(0, 0, 1));
  recorder_.DirectiveTaken(1, Directive(0, 0, 1));
  const SimReport report = recorder_.Analyze(TwoRanks(), 0, 1, {});
  EXPECT_TRUE(HasViolation(report, "handed the directive to rank 1 2 times"))
      << FormatReport(report);
}

TEST_F(RecorderTest, DetectsSequenceDisagreementAndReuse) {
  StageAll(0);
  Deliver(0, Directive(0, 0, 1));
  Deliver(1, Directive(0, 0, 2));
  StageAll(1);
  Deliver(0, Directive(1, 0, 2));
  Deliver(1, Directive(1, 0, 2));
  const SimReport report = recorder_.Analyze(TwoRanks(), 0, 2, {});
  EXPECT_TRUE(HasViolation(report, "members saw different sequence numbers [1,2]"))
      << FormatReport(report);
  EXPECT_TRUE(HasViolation(report, "sequence 2 was already used by step 0 chunk 0"))
      << FormatReport(report);
}

TEST_F(RecorderTest, SkippedStepsReleaseNothingAndReachEveryRank) {
  recorder_.SkipSent(0, 0, false);
  recorder_.SkipSent(0, 1, false);
  recorder_.SkipSent(0, 1, true);
  recorder_.StepSkippedArrived(0, 0);
  recorder_.StepSkippedArrived(1, 0);
  recorder_.SkipSent(1, 0, false);
  recorder_.SkipSent(1, 1, false);
  recorder_.StepSkippedArrived(0, 1);  // rank 1 never hears of it
  Deliver(0, Directive(1, 0, 1));      // and step 1 released something
  const SimReport report = recorder_.Analyze(TwoRanks(), 0, 2, {0, 1});
  EXPECT_EQ(report.skips_sent, 4u);
  EXPECT_EQ(report.duplicates_sent, 1u);
  EXPECT_EQ(report.skipped_steps, 2u);
  EXPECT_EQ(report.expected_releases, 0u);
  EXPECT_TRUE(HasViolation(report, "step 1: StepSkipped reached 1 of 2 ranks"))
      << FormatReport(report);
  EXPECT_TRUE(HasViolation(report, "step 1 chunk 0: released although every rank skipped"))
      << FormatReport(report);
  EXPECT_EQ(report.violations.size(), 2u) << FormatReport(report);
}

TEST_F(RecorderTest, FormatReportHasOneLinePerStepAndAVerdict) {
  StageAll(0);
  Deliver(0, Directive(0, 0, 1));
  Deliver(1, Directive(0, 0, 1));
  recorder_.StepSkippedArrived(0, 1);
  recorder_.StepSkippedArrived(1, 1);
  SimReport report = recorder_.Analyze(TwoRanks(), 0, 2, {1});
  std::string text = FormatReport(report);
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << text;  // header, 2 steps, totals, verdict
  EXPECT_TRUE(absl::StrContains(lines[1], "synced")) << text;
  EXPECT_TRUE(absl::StrContains(lines[1], "1/1")) << text;
  EXPECT_TRUE(absl::StrContains(lines[1], "r1/expert")) << text;
  EXPECT_TRUE(absl::StrContains(lines[2], "skipped")) << text;
  EXPECT_TRUE(absl::StartsWith(lines[4], "PASS")) << text;

  report.errors.push_back("rank 3: WaitForDirective(0, 0): DEADLINE_EXCEEDED");
  text = FormatReport(report);
  EXPECT_TRUE(absl::StrContains(text, "ERROR: rank 3")) << text;
  EXPECT_TRUE(absl::StrContains(text, "FAIL: 0 violations, 1 errors")) << text;
}

}  // namespace
}  // namespace psync::sim
