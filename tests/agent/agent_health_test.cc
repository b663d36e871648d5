// psync-agent's gRPC health service and graceful drain (SIGTERM: Agent::Drain): SERVING for ""
// and psync.v1.Coordinator while serving; on Drain every service turns NOT_SERVING for open Watch
// calls, no new call is accepted, a rank's open Session keeps working through the agent until it
// ends, and Drain returns once the local calls ended.
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "server/test_server.h"
#include "tests/agent/agent_harness.h"
#include "tests/health/health_probe.h"
#include "tests/service/raw_session.h"

namespace psync::testing {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckResponse;

TEST(AgentHealthTest, ServingThenNotServingWhileARankFinishesItsStepsThroughTheDrain) {
  auto server = server::TestServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto agent = StartAgent((*server)->target());
  ASSERT_NE(agent, nullptr);
  auto health = Health::NewStub(
      grpc::CreateChannel(agent->local_target(), grpc::InsecureChannelCredentials()));
  for (const std::string service : {"", "psync.v1.Coordinator"}) {
    const HealthCheck check = CheckHealth(health.get(), service);
    ASSERT_EQ(check.code, grpc::StatusCode::OK) << service;
    EXPECT_EQ(check.status, HealthCheckResponse::SERVING) << "'" << service << "'";
  }
  EXPECT_EQ(CheckHealth(health.get(), "psync.v1.Nope").code, grpc::StatusCode::NOT_FOUND);

  const v1::JoinRequest plan = MakeJoin("drain", /*world=*/1, /*rank=*/0, /*chunks=*/2);
  std::unique_ptr<Client> rank = ConnectRank(agent->local_target(), plan);
  ASSERT_NE(rank, nullptr);
  RunStep(*rank, plan, 0);

  HealthWatch watch(health.get(), "psync.v1.Coordinator");
  ASSERT_EQ(watch.Next(), HealthCheckResponse::SERVING);

  // A grace period far longer than the test's timeout: Drain returns because the calls ended.
  absl::Notification drained;
  std::thread drainer([&] {
    agent->Drain(absl::Hours(1));
    drained.Notify();
  });
  EXPECT_EQ(watch.Next(), HealthCheckResponse::NOT_SERVING);
  // A new call meanwhile is answered NOT_SERVING (in the moment between the status change and
  // the server refusing calls) or refused, and soon refused (UNAVAILABLE or CANCELLED, as gRPC
  // reports a call to a server shutting down).
  auto fresh = Health::NewStub(
      grpc::CreateChannel(agent->local_target(), grpc::InsecureChannelCredentials()));
  HealthCheck during{grpc::StatusCode::OK, HealthCheckResponse::UNKNOWN};
  for (absl::Time end = absl::Now() + absl::Seconds(30); absl::Now() < end;) {
    during = CheckHealth(fresh.get(), "");
    if (during.code != grpc::StatusCode::OK) break;
    EXPECT_EQ(during.status, HealthCheckResponse::NOT_SERVING);
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_THAT(during.code,
              ::testing::AnyOf(grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::CANCELLED));

  // The rank's Session, open before the drain, still carries whole steps.
  RunStep(*rank, plan, 1);
  RunStep(*rank, plan, 2);
  EXPECT_EQ(JobStatus(*v1::Coordinator::NewStub(grpc::CreateChannel(
                          (*server)->target(), grpc::InsecureChannelCredentials())),
                      "drain")
                .audit()
                .released(),
            6u);
  EXPECT_FALSE(drained.HasBeenNotified());

  rank.reset();
  (void)watch.Cancel();
  drainer.join();
}

}  // namespace
}  // namespace psync::testing
