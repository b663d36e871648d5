// Simulated MoE jobs (sim/sim.h: random arrival order, duplicates, skips, batches, an independent
// recorder of the invariants) with every rank behind a node agent, and with the agent's stream to
// the coordinator cut every 100 ms; then behind a node agent behind a relay (agent/relay_hub.h),
// with the relay's stream to the coordinator, or the agent's to the relay, cut every 100 ms.
#include <cstdio>

#include "client/testing/tcp_proxy.h"
#include "gtest/gtest.h"
#include "sim/sim_testing.h"
#include "tests/agent/agent_harness.h"

namespace psync::testing {
namespace {

using ::psync::sim::CoordinatorCounters;
using ::psync::sim::ExpectExactlyOnce;
using ::psync::sim::RunBreakingConnections;
using ::psync::sim::RunSimulatedJob;
using ::psync::sim::SimOptions;
using ::psync::sim::SimReport;
using ::psync::sim::SixteenRankPlan;

using AgentSimTest = ::psync::sim::SimServerTest;

TEST_F(AgentSimTest, SixteenRanksBehindOneAgentExactlyOnce) {
  auto node = StartAgent(server_->target());
  ASSERT_NE(node, nullptr);
  SimOptions options;
  options.target = node->local_target();
  options.job_id = "agent-sim";
  options.steps = 30;
  options.seed = 17;
  options.max_arrival_delay = absl::Microseconds(200);
  options.duplicate_probability = 0.05;
  options.skip_steps = {5, 19};
  options.max_batch_items = 3;

  absl::StatusOr<SimReport> report = RunSimulatedJob(SixteenRankPlan(), options);
  ASSERT_TRUE(report.ok()) << report.status();
  constexpr uint64_t kSynced = 28;
  const std::string text =
      ExpectExactlyOnce(*server_, options.job_id, *report, /*releases=*/4 * kSynced,
                        /*checkins=*/16 * 2 * 4 * kSynced, /*directives=*/16 * 4 * kSynced);
  EXPECT_EQ(report->duplicate_directives_dropped, 0u);
  const server::JobCounters counters = CoordinatorCounters(*server_, options.job_id);
  EXPECT_EQ(counters.skipped_steps, 2u);
  EXPECT_EQ(counters.syncs_done, 16 * 4 * kSynced);
  EXPECT_EQ(counters.rejected, 0u);
  const agent::AgentStats s = node->stats();
  EXPECT_LE(s.upstream_batches, s.local_messages);
  std::printf(
      "agent: %llu local messages in %llu upstream batches; %llu notices for %llu "
      "ranks; %llu local acks and %llu lazy ones\n%s",
      static_cast<unsigned long long>(s.local_messages),
      static_cast<unsigned long long>(s.upstream_batches),
      static_cast<unsigned long long>(s.notices_received),
      static_cast<unsigned long long>(s.notices_delivered),
      static_cast<unsigned long long>(s.local_acks),
      static_cast<unsigned long long>(s.local_lazy_acks), text.c_str());
}

TEST_F(AgentSimTest, AgentStreamCutEvery100MsStillReleasesExactlyOnce) {
  auto proxy = TcpProxy::Start(server_->target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  auto node = StartAgent((*proxy)->target());
  ASSERT_NE(node, nullptr);
  SimOptions options;
  options.target = node->local_target();
  options.job_id = "agent-chaos";
  options.steps = 30;
  options.seed = 99;
  options.max_arrival_delay = absl::Microseconds(300);
  options.duplicate_probability = 0.05;
  options.skip_steps = {11, 23};
  options.max_batch_items = 2;

  ::psync::sim::BrokenRun run = RunBreakingConnections(SixteenRankPlan(), options, proxy->get());
  const absl::StatusOr<SimReport>& report = run.report;
  ASSERT_TRUE(report.ok()) << report.status();
  constexpr uint64_t kSynced = 28;
  const std::string text =
      ExpectExactlyOnce(*server_, options.job_id, *report, /*releases=*/4 * kSynced,
                        /*checkins=*/16 * 2 * 4 * kSynced, /*directives=*/16 * 4 * kSynced);
  // The cuts happened while the ranks ran and were survived: the agent reconnected upstream (only
  // a cut makes it reconnect here, at most once per cut) and hid every cut from the ranks, whose
  // Sessions with it never broke; every count above is exact.
  const agent::AgentStats s = node->stats();
  EXPECT_GT(run.breaks, 0);
  EXPECT_GT(s.reconnects, 0u) << text;
  EXPECT_LE(s.reconnects, static_cast<uint64_t>(run.breaks)) << text;
  EXPECT_GT((*proxy)->connections_accepted(), 1) << "the agent connected again after a cut";
  EXPECT_EQ(report->reconnects, 0u) << text;
  EXPECT_TRUE(report->errors.empty()) << text;
  EXPECT_EQ(s.local_rejected, 0u);
  std::printf(
      "%d cuts; agent: %llu reconnects, %llu batches re-sent, %llu repeated directives "
      "dropped\n%s",
      run.breaks, static_cast<unsigned long long>(s.reconnects),
      static_cast<unsigned long long>(s.batches_resent),
      static_cast<unsigned long long>(s.duplicate_directives_dropped), text.c_str());
}

// The relay's own stream to the coordinator is cut: the relay re-attaches and re-sends; the node
// agent behind it and the ranks see nothing of it.
TEST_F(AgentSimTest, RelayStreamCutEvery100MsStillReleasesExactlyOnce) {
  auto proxy = TcpProxy::Start(server_->target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  auto relay = StartAgent((*proxy)->target());
  ASSERT_NE(relay, nullptr);
  auto node = StartAgent(relay->local_target());
  ASSERT_NE(node, nullptr);
  SimOptions options;
  options.target = node->local_target();
  options.job_id = "relay-chaos";
  options.steps = 30;
  options.seed = 41;
  options.max_arrival_delay = absl::Microseconds(300);
  options.duplicate_probability = 0.05;
  options.skip_steps = {7, 20};
  options.max_batch_items = 2;

  ::psync::sim::BrokenRun run = RunBreakingConnections(SixteenRankPlan(), options, proxy->get());
  const absl::StatusOr<SimReport>& report = run.report;
  ASSERT_TRUE(report.ok()) << report.status();
  constexpr uint64_t kSynced = 28;
  const std::string text =
      ExpectExactlyOnce(*server_, options.job_id, *report, /*releases=*/4 * kSynced,
                        /*checkins=*/16 * 2 * 4 * kSynced, /*directives=*/16 * 4 * kSynced);
  const agent::AgentStats r = relay->stats();
  const agent::AgentStats n = node->stats();
  EXPECT_GT(run.breaks, 0);
  EXPECT_GT(r.reconnects, 0u) << text;
  EXPECT_LE(r.reconnects, static_cast<uint64_t>(run.breaks)) << text;
  EXPECT_EQ(n.reconnects, 0u) << "the node agent's stream to the relay never broke\n" << text;
  EXPECT_EQ(report->reconnects, 0u) << text;
  EXPECT_TRUE(report->errors.empty()) << text;
  EXPECT_EQ(r.relay_refused, 0u);
  EXPECT_EQ(r.relayed_batches, n.upstream_batches);
  std::printf(
      "%d cuts; relay: %llu reconnects, %llu batches re-sent; node agent: %llu directives "
      "dropped as repeated\n%s",
      run.breaks, static_cast<unsigned long long>(r.reconnects),
      static_cast<unsigned long long>(r.batches_resent),
      static_cast<unsigned long long>(n.duplicate_directives_dropped), text.c_str());
}

// The node agent's stream to the relay is cut: the relay detaches the agent's ranks upstream, the
// agent reconnects and re-attaches them through it; the ranks see nothing of it.
TEST_F(AgentSimTest, AgentToRelayStreamCutEvery100MsStillReleasesExactlyOnce) {
  auto relay = StartAgent(server_->target());
  ASSERT_NE(relay, nullptr);
  auto proxy = TcpProxy::Start(relay->local_target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  auto node = StartAgent((*proxy)->target());
  ASSERT_NE(node, nullptr);
  SimOptions options;
  options.target = node->local_target();
  options.job_id = "relay-agent-chaos";
  options.steps = 30;
  options.seed = 43;
  options.max_arrival_delay = absl::Microseconds(300);
  options.duplicate_probability = 0.05;
  options.skip_steps = {9, 21};
  options.max_batch_items = 2;

  ::psync::sim::BrokenRun run = RunBreakingConnections(SixteenRankPlan(), options, proxy->get());
  const absl::StatusOr<SimReport>& report = run.report;
  ASSERT_TRUE(report.ok()) << report.status();
  constexpr uint64_t kSynced = 28;
  const std::string text =
      ExpectExactlyOnce(*server_, options.job_id, *report, /*releases=*/4 * kSynced,
                        /*checkins=*/16 * 2 * 4 * kSynced, /*directives=*/16 * 4 * kSynced);
  const agent::AgentStats r = relay->stats();
  const agent::AgentStats n = node->stats();
  EXPECT_GT(run.breaks, 0);
  EXPECT_GT(n.reconnects, 0u) << text;
  EXPECT_LE(n.reconnects, static_cast<uint64_t>(run.breaks)) << text;
  EXPECT_EQ(r.reconnects, 0u) << "the relay's stream to the coordinator never broke\n" << text;
  EXPECT_GT(r.relayed_attaches, 16u) << "every cut re-attached the ranks through the relay";
  EXPECT_EQ(report->reconnects, 0u) << text;
  EXPECT_TRUE(report->errors.empty()) << text;
  std::printf(
      "%d cuts; node agent: %llu reconnects, %llu batches re-sent; relay: %llu attaches, "
      "%llu messages refused\n%s",
      run.breaks, static_cast<unsigned long long>(n.reconnects),
      static_cast<unsigned long long>(n.batches_resent),
      static_cast<unsigned long long>(r.relayed_attaches),
      static_cast<unsigned long long>(r.relay_refused), text.c_str());
}

}  // namespace
}  // namespace psync::testing
