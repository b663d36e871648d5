#include "sim/sim_testing.h"

#include <thread>

#include "absl/synchronization/notification.h"

namespace psync::sim {

void SimServerTest::SetUp() {
  auto server = server::TestServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = std::move(*server);
}

SimPlan SixteenRankPlan() {
  SimPlan plan;
  plan.world_size = 16;
  plan.num_chunks = 4;
  plan.expert_parallel = 4;
  return plan;
}

BrokenRun RunBreakingConnections(const SimPlan& plan, const SimOptions& options,
                                 ::psync::testing::TcpProxy* proxy, absl::Duration period) {
  BrokenRun run;
  absl::Notification done;
  std::thread chaos([&] {
    while (!done.WaitForNotificationWithTimeout(period)) {
      if (run.breaks == 0) run.connections_before_first_break = proxy->connections_accepted();
      proxy->BreakConnections();
      ++run.breaks;
    }
  });
  run.report = RunSimulatedJob(plan, options);
  done.Notify();
  chaos.join();
  return run;
}

server::JobCounters CoordinatorCounters(server::TestServer& server, const std::string& job_id) {
  auto status = server.coordinator().GetJobStatus(job_id);
  if (!status.ok()) {
    ADD_FAILURE() << status.status();
    return server::JobCounters();
  }
  return status->counters;
}

std::string ExpectExactlyOnce(server::TestServer& server, const std::string& job_id,
                              const SimReport& report, uint64_t releases, uint64_t checkins,
                              uint64_t directives) {
  std::string text = FormatReport(report);
  EXPECT_TRUE(report.ok()) << text;
  EXPECT_EQ(report.releases, releases) << text;
  EXPECT_EQ(report.checkins_sent, checkins) << text;
  EXPECT_EQ(report.directives_received, directives) << text;
  const server::JobCounters counters = CoordinatorCounters(server, job_id);
  EXPECT_EQ(counters.releases, releases);
  EXPECT_EQ(counters.checkins, checkins);
  EXPECT_EQ(counters.violations, 0u);
  return text;
}

}  // namespace psync::sim
