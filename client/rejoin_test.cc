// The client's answer to an Abort that says `rejoin` (a forming generation rebuilt after a
// coordinator restart was renumbered, proto/psync/v1/coordinator.proto): it joins again with its
// resume and carries on in the new generation; the training loop sees no error. A scripted
// coordinator sends exactly that sequence (a real one needs two restarts in a row for it, which the
// deterministic simulation covers: tests/simulation, seed 585).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/client.h"
#include "client/testing/scripted_coordinator.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::client {
namespace {

// Join 1: generation 2. Its Session: the attach's Ack, then Abort(generation 2, rejoin).
// Join 2 (must carry a resume of generation 2): generation 3, resumed. Its Session: the Ack, then
// the directive of (step 0, chunk 0) in generation 3.
class RenumberingCoordinator final : public psync::v1::Coordinator::Service {
 public:
  grpc::Status Join(grpc::ServerContext*, const psync::v1::JoinRequest* request,
                    psync::v1::JoinResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++joins_;
    if (joins_ == 1) {
      response->set_generation(2);
      response->set_session_id("first");
      return grpc::Status::OK;
    }
    resumed_from_ = request->has_resume() ? request->resume().generation() : 0;
    response->set_generation(3);
    response->set_session_id("second");
    response->set_resumed(true);
    return grpc::Status::OK;
  }

  grpc::Status Session(grpc::ServerContext*, testing::SessionStream* stream) override {
    const std::optional<psync::v1::Attach> attach = testing::AcceptAttach(stream);
    if (!attach.has_value()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no attach acknowledged");
    }
    {
      absl::MutexLock lock(&mu_);
      attached_generations_.push_back(attach->generation());
    }
    psync::v1::SessionDown down;
    if (attach->generation() == 2) {
      psync::v1::Abort* abort = down.mutable_abort();
      abort->set_generation(2);
      abort->set_reason("rank 1 resumes generation 2, not older than this one; join generation 3");
      abort->set_rejoin(true);
    } else {
      psync::v1::SyncDirective* d = down.mutable_directive();
      d->set_generation(3);
      d->set_step(0);
      d->set_chunk(0);
      d->set_sequence(1);
    }
    if (stream->Write(down)) testing::ReadUntilClosed(stream);
    return grpc::Status::OK;
  }

  int joins() const {
    absl::MutexLock lock(&mu_);
    return joins_;
  }
  uint64_t resumed_from() const {
    absl::MutexLock lock(&mu_);
    return resumed_from_;
  }
  std::vector<uint64_t> attached_generations() const {
    absl::MutexLock lock(&mu_);
    return attached_generations_;
  }

 private:
  mutable absl::Mutex mu_;
  int joins_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t resumed_from_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> attached_generations_ ABSL_GUARDED_BY(mu_);
};

TEST(RejoinTest, AnAbortThatSaysRejoinIsJoinedAgainWithTheResume) {
  RenumberingCoordinator service;
  testing::ScriptedServer server(&service);
  ASSERT_TRUE(server.ok());
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(server.OneRankJob("renumbered"));
  ASSERT_TRUE(client.ok()) << client.status();

  absl::StatusOr<psync::v1::SyncDirective> d = (*client)->WaitForDirective(0, 0, absl::Seconds(20));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->generation(), 3u);
  EXPECT_EQ((*client)->generation(), 3u);
  EXPECT_EQ(service.joins(), 2);
  EXPECT_EQ(service.resumed_from(), 2u) << "the second Join carries the resume of generation 2";
  EXPECT_EQ(service.attached_generations(), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ((*client)->stats().resumes, 1u);
  (*client)->Close();
}

}  // namespace
}  // namespace psync::client
