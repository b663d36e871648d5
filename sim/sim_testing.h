// Test support for simulated jobs over real gRPC: a fixture with an in-process coordinator, a run
// while the network between the ranks (or their node agent) and the coordinator keeps breaking,
// and the check that the coordinator's own counters agree with the simulation.
//
// For tests only. Each function runs on the test's thread; RunBreakingConnections starts and
// joins one more thread of its own.
#ifndef PSYNC_SIM_SIM_TESTING_H_
#define PSYNC_SIM_SIM_TESTING_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/testing/tcp_proxy.h"
#include "gtest/gtest.h"
#include "server/test_server.h"
#include "sim/sim.h"

namespace psync::sim {

// A real coordinator (server::TestServer) started before every test, shut down after it.
class SimServerTest : public ::testing::Test {
 protected:
  void SetUp() override;

  std::unique_ptr<server::TestServer> server_;
};

// W=16 ranks, 4 chunks, E=4: the job of the tests whose network keeps breaking.
SimPlan SixteenRankPlan();

struct BrokenRun {
  absl::StatusOr<SimReport> report;
  int breaks = 0;  // BreakConnections calls made while the job ran
  // Connections the proxy had accepted when it first broke them (those it accepted after that are
  // the clients connecting again). Ranks may share one connection, so this is not the rank count.
  int connections_before_first_break = 0;
};

// RunSimulatedJob(plan, options), while every `period` `proxy` breaks every connection it carries.
BrokenRun RunBreakingConnections(const SimPlan& plan, const SimOptions& options,
                                 ::psync::testing::TcpProxy* proxy,
                                 absl::Duration period = absl::Milliseconds(100));

// The coordinator's own counters of `job_id`; a test failure (and all zeros) when it has no such
// job.
server::JobCounters CoordinatorCounters(server::TestServer& server, const std::string& job_id);

// Expects `report` of job `job_id` to be ok() and to count exactly `releases` releases,
// `checkins` check-ins sent and `directives` directives received (duplicates and re-sends are not
// counted), and the coordinator's counters to show the same releases and check-ins and no
// violation. Returns FormatReport(report), for the test's own checks and output.
std::string ExpectExactlyOnce(server::TestServer& server, const std::string& job_id,
                              const SimReport& report, uint64_t releases, uint64_t checkins,
                              uint64_t directives);

}  // namespace psync::sim

#endif  // PSYNC_SIM_SIM_TESTING_H_
