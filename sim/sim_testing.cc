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

}  // namespace psync::sim
