// ServiceFixture: a test over real gRPC against an in-process coordinator (server::TestServer) on a
// FakeClock, with a channel and a stub to it, and the calls service tests make through them.
//
// SetUp starts the coordinator with default options; a test that needs others overrides SetUp
// and calls StartServer. For tests only; one test thread drives it.
#ifndef PSYNC_TESTS_SERVICE_SERVICE_FIXTURE_H_
#define PSYNC_TESTS_SERVICE_SERVICE_FIXTURE_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "server/test_server.h"
#include "tests/service/raw_session.h"

namespace psync::testing {

// A coordinator with default options but `delay` as its --lazy_ack_delay; null (and a non-fatal
// failure) when it cannot start.
inline std::unique_ptr<server::TestServer> StartWithLazyAckDelay(absl::Duration delay) {
  server::ServerOptions options;
  options.streams.lazy_ack_delay = delay;
  auto server = server::TestServer::Start(std::move(options));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

class ServiceFixture : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(); }

  // Starts the coordinator on clock_ and connects stub_ to it (a fatal failure if it cannot start).
  void StartServer(server::CoordinatorOptions options = {}) {
    auto server = server::TestServer::Start(std::move(options), &clock_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    stub_ = v1::Coordinator::NewStub(channel_);
  }

  // Joins with `request` and attaches a Session as the joined rank; *joined gets the Join answer.
  // A non-fatal failure (and a session that is not attached) when either is refused.
  std::unique_ptr<RawSession> JoinAndAttach(const v1::JoinRequest& request,
                                            v1::JoinResponse* joined) {
    grpc::ClientContext context;
    grpc::Status s = stub_->Join(&context, request, joined);
    EXPECT_TRUE(s.ok()) << s.error_message();
    auto session = std::make_unique<RawSession>(stub_.get());
    s = session->Attach(request.job_id(), request.rank(), joined->generation(),
                        joined->session_id());
    EXPECT_TRUE(s.ok()) << s.error_message();
    return session;
  }

  // GetJobStatus of `job` (a non-fatal failure when it is refused).
  v1::JobStatus JobStatus(const std::string& job) {
    grpc::ClientContext context;
    v1::GetJobStatusRequest request;
    request.set_job_id(job);
    v1::JobStatus status;
    grpc::Status s = stub_->GetJobStatus(&context, request, &status);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return status;
  }

  serve::FakeClock clock_;
  std::unique_ptr<server::TestServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

}  // namespace psync::testing

#endif  // PSYNC_TESTS_SERVICE_SERVICE_FIXTURE_H_
