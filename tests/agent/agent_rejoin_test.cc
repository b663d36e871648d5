// A node agent whose rank is being ended so that it joins again: a refusal of the rank's messages
// that comes with the rank's closure (UNAVAILABLE) is not passed on to the rank. A coordinator that
// restarted, or a relay that forgot the rank's attachment with it, refuses such messages ("not
// attached on this agent session"); the rank's client would take that refusal as its check-in's
// answer and never send it again. Left unanswered, the client sends it again on its next Session.
//
// The coordinator here is scripted (one AgentSession, answered as written below), so the order of
// what comes down is exact: the refusal and the closure in one AgentDown, the refusal listed first
// (as AgentDown lists acks before closures).
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "tests/agent/agent_harness.h"
#include "tests/service/raw_session.h"

namespace psync::testing {
namespace {

// Accepts the attach; answers the first batch by refusing its every message with
// FAILED_PRECONDITION and closing the rank with UNAVAILABLE, both in one AgentDown.
class RefuseAndCloseCoordinator final : public v1::Coordinator::Service {
 public:
  grpc::Status AgentSession(grpc::ServerContext* /*context*/,
                            grpc::ServerReaderWriter<v1::AgentDown, v1::AgentUp>* stream) override {
    v1::AgentUp up;
    uint64_t attach_id = 0;
    v1::Attach attach;
    while (stream->Read(&up)) {
      v1::AgentDown down;
      if (up.has_attach()) {
        attach_id = up.request_id();
        attach = up.attach().attach();
        down.add_acks()->set_request_id(up.request_id());
      } else if (up.has_batch()) {
        v1::AgentAck* ack = down.add_acks();
        ack->set_request_id(up.request_id());
        for (int i = 0; i < up.batch().ranks_size(); ++i) {
          v1::MessageStatus* refused = ack->add_rejected();
          refused->set_index(static_cast<uint32_t>(i));
          refused->set_code(static_cast<int32_t>(grpc::StatusCode::FAILED_PRECONDITION));
          refused->set_message("rank 0 of job 'j' is not attached on this agent session");
        }
        v1::AgentRankClosed* closed = down.add_closed();
        closed->set_job_id(attach.job_id());
        closed->set_rank(attach.rank());
        closed->set_attach_request_id(attach_id);
        closed->set_code(static_cast<int32_t>(grpc::StatusCode::UNAVAILABLE));
        closed->set_message("the coordinator restarted: join again");
        absl::MutexLock lock(&mu_);
        ++batches_;
      } else {
        continue;
      }
      if (!stream->Write(down)) break;
    }
    return grpc::Status::OK;
  }

  int batches() {
    absl::MutexLock lock(&mu_);
    return batches_;
  }

 private:
  absl::Mutex mu_;
  int batches_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(AgentRejoinTest, ARefusalThatComesWithItsRanksClosureIsNotPassedOn) {
  RefuseAndCloseCoordinator coordinator;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&coordinator);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  std::unique_ptr<agent::Agent> node = StartAgent(absl::StrCat("127.0.0.1:", port));
  ASSERT_NE(node, nullptr);

  auto stub = v1::Coordinator::NewStub(
      grpc::CreateChannel(node->local_target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto session = stub->Session(&context);
  v1::JoinResponse joined;
  joined.set_generation(1);
  ASSERT_TRUE(session->Write(AttachMessage("j", 0, joined)));
  v1::SessionDown down;
  ASSERT_TRUE(session->Read(&down));
  ASSERT_TRUE(down.has_ack()) << down.DebugString();
  EXPECT_EQ(down.ack().code(), 0) << down.ack().message();

  v1::SessionUp staged;
  staged.set_request_id(down.ack().request_id() + 1);
  staged.mutable_staged()->set_generation(1);
  v1::Staged* item = staged.mutable_staged()->add_items();
  item->set_step(0);
  item->set_chunk(0);
  item->set_optimizer("dense");
  ASSERT_TRUE(session->Write(staged));

  // Nothing answers the check-in: the Session ends with the closure's status.
  int answers = 0;
  while (session->Read(&down)) {
    if (down.has_ack() && down.ack().request_id() == staged.request_id()) {
      ++answers;
      ADD_FAILURE() << "the check-in was answered: " << down.ack().code() << " "
                    << down.ack().message();
    }
  }
  const grpc::Status ended = session->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE) << ended.error_message();
  EXPECT_EQ(answers, 0);
  EXPECT_EQ(coordinator.batches(), 1);
  node->Shutdown();
  server->Shutdown();
}

}  // namespace
}  // namespace psync::testing
