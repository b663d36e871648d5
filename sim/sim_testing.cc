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
      proxy->BreakConnections();
      ++run.breaks;
    }
  });
  run.report = RunSimulatedJob(plan, options);
  done.Notify();
  chaos.join();
  return run;
}

void ExpectCoordinatorCounted(server::TestServer& server, const std::string& job_id,
                              uint64_t releases, uint64_t checkins) {
  auto status = server.coordinator().GetJobStatus(job_id);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->counters.releases, releases);
  EXPECT_EQ(status->counters.checkins, checkins);
  EXPECT_EQ(status->counters.violations, 0u);
}

void ExpectCoordinatorSynced(server::TestServer& server, const std::string& job_id,
                             uint64_t skipped_steps, uint64_t syncs_done) {
  auto status = server.coordinator().GetJobStatus(job_id);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->counters.skipped_steps, skipped_steps);
  EXPECT_EQ(status->counters.syncs_done, syncs_done);
  EXPECT_EQ(status->counters.rejected, 0u);
}

std::string ExpectExactlyOnce(server::TestServer& server, const std::string& job_id,
                              const SimReport& report, uint64_t releases, uint64_t checkins,
                              uint64_t directives) {
  std::string text = FormatReport(report);
  EXPECT_TRUE(report.ok()) << text;
  EXPECT_EQ(report.releases, releases) << text;
  EXPECT_EQ(report.checkins_sent, checkins) << text;
  EXPECT_EQ(report.directives_received, directives) << text;
  ExpectCoordinatorCounted(server, job_id, releases, checkins);
  return text;
}

}  // namespace psync::sim
