// Simulated ranks against a real coordinator over gRPC: 64 ranks x 2 optimizers x 4 chunks x 50
// steps (W=64, E=8), random order and delays, duplicate check-ins, batches, and skipped steps. The
// recorder must find no violation, and the counts must be exact.
#include <cstdio>
#include <set>

#include "client/testing/tcp_proxy.h"
#include "gtest/gtest.h"
#include "sim/sim_testing.h"

namespace psync::sim {
namespace {

using SimIntegrationTest = SimServerTest;

TEST_F(SimIntegrationTest, SixtyFourRanksFiftyStepsExactlyOnce) {
  SimPlan plan;
  plan.world_size = 64;
  plan.num_chunks = 4;
  plan.expert_parallel = 8;

  SimOptions options;
  options.target = server_->target();
  options.job_id = "sim-64x4x50";
  options.steps = 50;
  options.seed = 20240611;
  options.max_arrival_delay = absl::Microseconds(200);
  options.duplicate_probability = 0.05;
  options.skip_steps = {7, 23, 41};
  options.max_batch_items = 3;
  options.call_timeout = absl::Seconds(30);

  absl::StatusOr<SimReport> report = RunSimulatedJob(plan, options);
  ASSERT_TRUE(report.ok()) << report.status();
  constexpr uint64_t kSkipped = 3;
  constexpr uint64_t kSynced = 50 - kSkipped;
  // The coordinator's own counters agree with the independent recorder.
  const std::string text =
      ExpectExactlyOnce(*server_, options.job_id, *report, /*releases=*/4 * kSynced,
                        /*checkins=*/64 * 2 * 4 * kSynced, /*directives=*/64 * 4 * kSynced);
  EXPECT_TRUE(report->violations.empty()) << text;
  EXPECT_TRUE(report->errors.empty()) << text;
  EXPECT_EQ(report->skipped_steps, kSkipped);
  EXPECT_EQ(report->steps.size(), 50u);
  EXPECT_EQ(report->expected_releases, 4 * kSynced);
  EXPECT_EQ(report->skips_sent, 64 * kSkipped);
  EXPECT_GT(report->duplicates_sent, 0u);
  ASSERT_EQ(report->directives_per_rank.size(), 64u);
  for (uint32_t r = 0; r < 64; ++r) {
    EXPECT_EQ(report->directives_per_rank[r], plan.MemberChunks(r).size() * kSynced) << r;
  }
  // No reconnect happened, so the coordinator never repeated a directive.
  EXPECT_EQ(report->duplicate_directives_dropped, 0u);
  const server::JobCounters counters = CoordinatorCounters(*server_, options.job_id);
  EXPECT_EQ(counters.skipped_steps, kSkipped);
  EXPECT_EQ(counters.syncs_done, 64 * 4 * kSynced);
  EXPECT_EQ(counters.rejected, 0u);
  std::printf("%s", text.c_str());
}

TEST_F(SimIntegrationTest, DenseOnlyAndExpertOnlyChunksWithSeededSkips) {
  SimPlan plan;
  plan.world_size = 8;
  plan.num_chunks = 4;
  plan.expert_parallel = 4;
  plan.dense_chunks = std::set<uint32_t>{0, 1};
  plan.expert_chunks = std::set<uint32_t>{1, 2};  // chunk 3 holds nothing: never released

  SimOptions options;
  options.target = server_->target();
  options.job_id = "sim-mixed";
  options.steps = 20;
  options.first_step = 1000;
  options.seed = 7;
  options.max_arrival_delay = absl::Microseconds(100);
  options.duplicate_probability = 0.2;
  options.skip_probability = 0.2;

  const std::set<uint64_t> skipped = SkippedSteps(options);
  ASSERT_FALSE(skipped.empty());
  ASSERT_LT(skipped.size(), 20u);
  absl::StatusOr<SimReport> report = RunSimulatedJob(plan, options);
  ASSERT_TRUE(report.ok()) << report.status();
  const uint64_t synced = 20 - skipped.size();
  ExpectExactlyOnce(*server_, options.job_id, *report, /*releases=*/3 * synced,
                    /*checkins=*/8 * (1 + 2 + 1) * synced, /*directives=*/8 * 3 * synced);
}

// The network between the ranks and the coordinator drops every 100 ms: clients reconnect, re-send
// what was not acknowledged, and drop the directives the coordinator repeats on re-attach. The
// invariants and the counts must not change.
TEST_F(SimIntegrationTest, BrokenConnectionsStillReleaseExactlyOnce) {
  auto proxy = ::psync::testing::TcpProxy::Start(server_->target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  SimOptions options;
  options.target = (*proxy)->target();
  options.job_id = "sim-chaos";
  options.steps = 40;
  options.seed = 99;
  options.max_arrival_delay = absl::Microseconds(300);
  options.duplicate_probability = 0.05;
  options.skip_steps = {11, 30};
  options.max_batch_items = 2;

  BrokenRun run = RunBreakingConnections(SixteenRankPlan(), options, proxy->get());
  const absl::StatusOr<SimReport>& report = run.report;
  ASSERT_TRUE(report.ok()) << report.status();
  constexpr uint64_t kSynced = 38;
  const std::string text =
      ExpectExactlyOnce(*server_, options.job_id, *report, /*releases=*/4 * kSynced,
                        /*checkins=*/16 * 2 * 4 * kSynced, /*directives=*/16 * 4 * kSynced);
  // The cuts happened while the ranks ran, and were survived: clients re-attached (only a cut
  // makes a client reconnect here, each cut at most once per rank), and every count above is
  // exact: each step's chunks released once, every directive received once.
  EXPECT_GT(run.breaks, 0);
  EXPECT_GT(report->reconnects, 0u) << text;
  EXPECT_LE(report->reconnects, static_cast<uint64_t>(run.breaks) * 16) << text;
  EXPECT_GT((*proxy)->connections_accepted(), run.connections_before_first_break)
      << "the ranks connected again after a cut";
  EXPECT_TRUE(report->violations.empty()) << text;
  EXPECT_TRUE(report->errors.empty()) << text;
  std::printf("%d connection breaks, %d connections; %s", run.breaks,
              (*proxy)->connections_accepted(), text.c_str());
}

TEST_F(SimIntegrationTest, BadOptionsAreRejected) {
  SimPlan plan;
  plan.world_size = 6;
  plan.expert_parallel = 4;
  SimOptions options;
  options.target = server_->target();
  EXPECT_EQ(RunSimulatedJob(plan, options).status().code(), absl::StatusCode::kInvalidArgument);
  plan.expert_parallel = 2;
  options.duplicate_probability = 2;
  EXPECT_EQ(RunSimulatedJob(plan, options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psync::sim
