// The gRPC health service of the coordinator, over real gRPC: the exact status of each service
// name while serving, and what a graceful drain (SIGTERM: CoordinatorServer::Drain) does: every
// service turns NOT_SERVING for open Watch calls, no new call is accepted, an open Session keeps
// being answered until it ends, and Drain returns once the calls in flight ended or the grace
// period passed (their streams cancelled).
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "server/test_server.h"
#include "tests/health/health_probe.h"
#include "tests/service/raw_session.h"

namespace psync::testing {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckResponse;

constexpr absl::Duration kCallTimeout = absl::Seconds(30);

class HealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions options;  // no HTTP side: only the gRPC server is under test
    auto server = server::TestServer::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    health_ = Health::NewStub(channel_);
    stub_ = v1::Coordinator::NewStub(channel_);
  }

  std::unique_ptr<server::TestServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Health::Stub> health_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

TEST_F(HealthTest, EveryServedServiceIsServingAndOthersAreNotFound) {
  for (const std::string service : {"", "psync.v1.Coordinator"}) {
    const HealthCheck r = CheckHealth(health_.get(), service);
    EXPECT_EQ(r.code, grpc::StatusCode::OK) << "'" << service << "'";
    EXPECT_EQ(r.status, HealthCheckResponse::SERVING) << "'" << service << "'";
  }
  for (const std::string service : {"psync.v1.Nope", "psync.v1.coordinator", "grpc.health.v1"}) {
    EXPECT_EQ(CheckHealth(health_.get(), service).code, grpc::StatusCode::NOT_FOUND) << service;
  }
}

TEST_F(HealthTest, DrainTurnsEveryServiceNotServingAndLetsAnOpenSessionFinish) {
  v1::JoinResponse joined;
  const v1::JoinRequest join = MakeJoin("drain", /*world=*/1, /*rank=*/0, /*chunks=*/2);
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Join(&context, join, &joined).ok());
  }
  RawSession session(stub_.get());
  ASSERT_TRUE(session.Attach("drain", 0, joined.generation(), joined.session_id()).ok());
  ASSERT_TRUE(session.Stage(joined.generation(), 0, 0, "dense").ok());

  HealthWatch whole(health_.get(), "");
  HealthWatch coordinator(health_.get(), "psync.v1.Coordinator");
  ASSERT_EQ(whole.Next(), HealthCheckResponse::SERVING);
  ASSERT_EQ(coordinator.Next(), HealthCheckResponse::SERVING);

  // A grace period far longer than the test's timeout: Drain can only return because every call
  // in flight ended, not because the grace period passed.
  absl::Notification drained;
  std::thread drainer([&] {
    server_->Drain(absl::Hours(1));
    drained.Notify();
  });
  EXPECT_EQ(whole.Next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(coordinator.Next(), HealthCheckResponse::NOT_SERVING);

  // A new call meanwhile is answered NOT_SERVING (in the moment between the status change and
  // the server refusing calls) or refused, and soon refused: UNAVAILABLE when it finds the listener
  // closed, CANCELLED when it reaches the shutting-down server over a connection it shares with an
  // earlier channel (gRPC pools them per target).
  auto fresh =
      Health::NewStub(grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  HealthCheck during{grpc::StatusCode::OK, HealthCheckResponse::UNKNOWN};
  for (absl::Time end = absl::Now() + kCallTimeout; absl::Now() < end;) {
    during = CheckHealth(fresh.get(), "");
    if (during.code != grpc::StatusCode::OK) break;
    EXPECT_EQ(during.status, HealthCheckResponse::NOT_SERVING);
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_THAT(during.code,
              ::testing::AnyOf(grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::CANCELLED));
  EXPECT_FALSE(drained.HasBeenNotified());

  // The open Session is still answered: its check-in while draining releases chunk 1 of step 0
  // (chunk 0 was released before), each exactly once.
  EXPECT_TRUE(session.Stage(joined.generation(), 0, 1, "dense").ok());
  std::multiset<uint32_t> released;
  v1::SessionDown notice;
  while (released.size() < 2 && session.ReadNotice(&notice)) {
    if (notice.has_directive()) released.insert(notice.directive().chunk());
  }
  EXPECT_EQ(released, (std::multiset<uint32_t>{0, 1}));
  EXPECT_FALSE(drained.HasBeenNotified());

  EXPECT_TRUE(session.Finish().ok());
  whole.Cancel();
  coordinator.Cancel();
  drainer.join();
}

TEST_F(HealthTest, DrainCancelsCallsStillOpenAfterTheGracePeriod) {
  v1::JoinResponse joined;
  const v1::JoinRequest join = MakeJoin("stuck", /*world=*/2, /*rank=*/0, /*chunks=*/1);
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Join(&context, join, &joined).ok());
  }
  RawSession session(stub_.get());
  ASSERT_TRUE(session.Attach("stuck", 0, joined.generation(), joined.session_id()).ok());

  // The session never ends by itself: Drain returns once the grace period passed, and the
  // session's stream ended (cancelled), which ReadNotice reports as the end of the stream.
  server_->Drain(absl::Milliseconds(200));
  v1::SessionDown notice;
  EXPECT_FALSE(session.ReadNotice(&notice));
  const grpc::Status final_status = session.Finish();
  EXPECT_FALSE(final_status.ok());
  EXPECT_NE(final_status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

// --health_listen: a plaintext port with only the health service (for probes of a TLS
// coordinator), answering as the main port does; while the coordinator drains it answers
// NOT_SERVING (the main port refuses new calls), and it closes when the drain is over.
TEST(HealthPortTest, AnswersLikeTheMainPortAndDrainsWithIt) {
  server::ServerOptions options;
  options.health_listen = "127.0.0.1:0";
  auto server = server::TestServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_NE((*server)->health_port(), 0);
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->health_port()),
                                     grpc::InsecureChannelCredentials());
  auto health = Health::NewStub(channel);
  for (const std::string service : {"", "psync.v1.Coordinator"}) {
    const HealthCheck r = CheckHealth(health.get(), service);
    EXPECT_EQ(r.code, grpc::StatusCode::OK) << "'" << service << "'";
    EXPECT_EQ(r.status, HealthCheckResponse::SERVING) << "'" << service << "'";
  }
  EXPECT_EQ(CheckHealth(health.get(), "psync.v1.Nope").code, grpc::StatusCode::NOT_FOUND);
  // Only the health service is there.
  {
    grpc::ClientContext context;
    v1::ListJobsResponse response;
    EXPECT_EQ(v1::Coordinator::NewStub(channel)
                  ->ListJobs(&context, v1::ListJobsRequest(), &response)
                  .error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
  }
  // An open Session holds the drain, so that what a probe sees while draining can be asked.
  auto main_stub = v1::Coordinator::NewStub(
      grpc::CreateChannel((*server)->target(), grpc::InsecureChannelCredentials()));
  v1::JoinResponse joined;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(main_stub->Join(&context, MakeJoin("probe", 1, 0, 1), &joined).ok());
  }
  RawSession session(main_stub.get());
  ASSERT_TRUE(session.Attach("probe", 0, joined.generation(), joined.session_id()).ok());
  HealthWatch coordinator(health.get(), "psync.v1.Coordinator");
  ASSERT_EQ(coordinator.Next(), HealthCheckResponse::SERVING);
  absl::Notification drained;
  std::thread drainer([&] {
    (*server)->Drain(absl::Hours(1));
    drained.Notify();
  });
  EXPECT_EQ(coordinator.Next(), HealthCheckResponse::NOT_SERVING);
  // While the drain lasts, a new Check on the health port (a probe's) is answered NOT_SERVING,
  // while the main port refuses new calls (docs/deploy.md, "Health and graceful stop").
  for (const std::string service : {"", "psync.v1.Coordinator"}) {
    const HealthCheck r = CheckHealth(health.get(), service);
    EXPECT_EQ(r.code, grpc::StatusCode::OK) << "'" << service << "'";
    EXPECT_EQ(r.status, HealthCheckResponse::NOT_SERVING) << "'" << service << "'";
  }
  auto fresh_main =
      Health::NewStub(grpc::CreateChannel((*server)->target(), grpc::InsecureChannelCredentials()));
  HealthCheck on_main{grpc::StatusCode::OK, HealthCheckResponse::UNKNOWN};
  for (absl::Time end = absl::Now() + kCallTimeout; absl::Now() < end;) {
    on_main = CheckHealth(fresh_main.get(), "");
    if (on_main.code != grpc::StatusCode::OK) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_THAT(on_main.code,
              ::testing::AnyOf(grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::CANCELLED));
  EXPECT_FALSE(drained.HasBeenNotified());
  EXPECT_TRUE(session.Finish().ok());
  coordinator.Cancel();
  drainer.join();
  // The drain over, the health port is closed too.
  EXPECT_NE(CheckHealth(health.get(), "").code, grpc::StatusCode::OK);
}

}  // namespace
}  // namespace psync::testing
