// The client's fencing of coordinator replicas: a directive carrying an older owner epoch than one
// the client has already seen comes from a deposed owner and is dropped (docs/design.md,
// "Replicas"). Real coordinators never send one (an owner stops releasing before its lease can
// pass to another replica), so a scripted coordinator sends the client exactly the sequence a
// deposed owner racing its successor would produce.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/client.h"
#include "client/testing/scripted_coordinator.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::client {
namespace {

constexpr uint64_t kGeneration = 1;

// Answers Join, acknowledges the Session's attach, then writes `directives` in order and keeps the
// stream open until the client goes.
class ScriptedCoordinator final : public psync::v1::Coordinator::Service {
 public:
  explicit ScriptedCoordinator(std::vector<psync::v1::SyncDirective> directives)
      : directives_(std::move(directives)) {}

  grpc::Status Join(grpc::ServerContext*, const psync::v1::JoinRequest*,
                    psync::v1::JoinResponse* response) override {
    response->set_generation(kGeneration);
    response->set_session_id("scripted");
    return grpc::Status::OK;
  }

  grpc::Status Session(grpc::ServerContext*, testing::SessionStream* stream) override {
    if (!testing::AcceptAttach(stream).has_value()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no attach acknowledged");
    }
    for (const psync::v1::SyncDirective& d : directives_) {
      psync::v1::SessionDown down;
      *down.mutable_directive() = d;
      if (!stream->Write(down)) return grpc::Status::OK;
    }
    testing::ReadUntilClosed(stream);
    return grpc::Status::OK;
  }

 private:
  const std::vector<psync::v1::SyncDirective> directives_;
};

psync::v1::SyncDirective Directive(uint64_t step, uint64_t epoch) {
  psync::v1::SyncDirective d;
  d.set_generation(kGeneration);
  d.set_step(step);
  d.set_chunk(0);
  d.set_sequence(step + 1);
  d.set_epoch(epoch);
  return d;
}

TEST(DeposedOwnerTest, ADirectiveOfAnOlderEpochIsDropped) {
  // Epoch 7 owns the job; a deposed owner's (epoch 4) directive for step 1 arrives between two of
  // the current owner's. Step 3 comes last, so once it is here every earlier write was read.
  ScriptedCoordinator service({Directive(0, 7), Directive(1, 4), Directive(2, 7), Directive(3, 9)});
  testing::ScriptedServer server(&service);
  ASSERT_TRUE(server.ok());
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(server.OneRankJob("fenced"));
  ASSERT_TRUE(client.ok()) << client.status();

  absl::StatusOr<psync::v1::SyncDirective> last =
      (*client)->WaitForDirective(3, 0, absl::Seconds(10));
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->epoch(), 9u);
  EXPECT_EQ((*client)->WaitForDirective(0, 0, absl::ZeroDuration())->epoch(), 7u);
  EXPECT_EQ((*client)->WaitForDirective(2, 0, absl::ZeroDuration())->epoch(), 7u);
  EXPECT_EQ((*client)->WaitForDirective(1, 0, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  const ClientStats stats = (*client)->stats();
  EXPECT_EQ(stats.deposed_directives_dropped, 1u);
  EXPECT_EQ(stats.directives_received, 3u);
  (*client)->Close();
}

}  // namespace
}  // namespace psync::client
