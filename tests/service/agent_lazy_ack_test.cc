// Lazy acks of node-agent batches on the wire (AgentUp.lazy_ack, AgentDown.acked_through), against
// a coordinator whose lazy acks never flush on their own (--lazy_ack_delay=1h), so what arrives is
// decided by what is sent, not by timing. A job of 2 ranks (both on this AgentSession) and 3
// chunks, every rank declaring "dense" on every chunk: an applied lazy batch is answered by the
// next message the stream is sent (the directive a later batch releases), a batch with a rejected
// message gets an AgentAck of its own in the message of the notices it released, a batch without
// lazy_ack gets its AgentAck at once, and the end of the stream answers what is still pending. A
// zero delay acks every batch at once; a short one answers a lazy batch by a message of its own.
// A rank not attached on the stream, or superseded elsewhere, has its messages refused one by one.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/test_server.h"
#include "tests/service/raw_session.h"
#include "tests/service/service_fixture.h"

namespace psync {
namespace {

using ::testing::ElementsAre;

// One AgentSession carrying ranks 0 and 1 of a fresh job of 2 ranks and 3 chunks, attached as
// requests 1 and 2.
class AgentStream {
 public:
  AgentStream(server::TestServer& server, const std::string& job) : job_(job) {
    auto channel = grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials());
    stub_ = v1::Coordinator::NewStub(channel);
    std::vector<v1::JoinResponse> joined(2);
    for (uint32_t r = 0; r < 2; ++r) joined[r] = Join(r);
    generation_ = joined[0].generation();
    // A read that never comes fails the test instead of hanging it.
    context_.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    stream_ = stub_->AgentSession(&context_);
    for (uint32_t r = 0; r < 2; ++r) WriteAttach(r + 1, r, joined[r]);
    // The two attach AgentAcks (in one message or two).
    int acks = 0;
    v1::AgentDown down;
    while (acks < 2 && stream_->Read(&down)) acks += down.acks_size();
    EXPECT_EQ(acks, 2);
  }

  // Writes batch `request_id`: each of `ranks` checks in "dense" for `chunk` of step 0 (of the
  // stream's job, or `job`).
  void Stage(uint64_t request_id, bool lazy, uint32_t chunk, const std::vector<uint32_t>& ranks,
             const std::string& job = "") {
    v1::AgentUp up;
    up.set_request_id(request_id);
    up.set_lazy_ack(lazy);
    v1::AgentBatch* batch = up.mutable_batch();
    batch->set_job_id(job.empty() ? job_ : job);
    batch->set_generation(generation_);
    v1::MergedStaged* staged = batch->add_staged();
    staged->set_chunk(chunk);
    staged->set_optimizer("dense");
    for (uint32_t i = 0; i < ranks.size(); ++i) {
      batch->add_ranks(ranks[i]);
      staged->add_messages(i);
    }
    ASSERT_TRUE(stream_->Write(up));
  }

  // `rank` joins (again: the same incarnation, so a reconnect of the running rank).
  v1::JoinResponse Join(uint32_t rank) {
    grpc::ClientContext context;
    v1::JoinResponse joined;
    EXPECT_TRUE(stub_->Join(&context, testing::MakeJoin(job_, 2, rank, 3), &joined).ok());
    return joined;
  }

  // Writes attach `request_id` of `rank` as `joined` allows.
  void WriteAttach(uint64_t request_id, uint32_t rank, const v1::JoinResponse& joined) {
    v1::AgentUp up;
    up.set_request_id(request_id);
    v1::Attach* a = up.mutable_attach()->mutable_attach();
    a->set_job_id(job_);
    a->set_rank(rank);
    a->set_generation(joined.generation());
    a->set_session_id(joined.session_id());
    EXPECT_TRUE(stream_->Write(up));
  }

  // Writes detach `request_id` of `rank`'s attach `attach_request_id`.
  void WriteDetach(uint64_t request_id, uint32_t rank, uint64_t attach_request_id) {
    v1::AgentUp up;
    up.set_request_id(request_id);
    v1::AgentDetach* d = up.mutable_detach();
    d->set_job_id(job_);
    d->set_rank(rank);
    d->set_attach_request_id(attach_request_id);
    EXPECT_TRUE(stream_->Write(up));
  }

  // Reads until the AgentAck of `request_id`; the ranks closed meanwhile are added to *closed.
  v1::AgentAck ReadAck(uint64_t request_id, std::vector<uint32_t>* closed) {
    v1::AgentDown down;
    while (stream_->Read(&down)) {
      for (const v1::AgentRankClosed& c : down.closed()) closed->push_back(c.rank());
      for (const v1::AgentAck& ack : down.acks()) {
        if (ack.request_id() == request_id) return ack;
      }
    }
    ADD_FAILURE() << "the stream ended before the answer of request " << request_id;
    return v1::AgentAck();
  }

  v1::AgentDown Read() {
    v1::AgentDown down;
    EXPECT_TRUE(stream_->Read(&down));
    return down;
  }

  // Half-closes; returns what came before the stream ended, and its status.
  std::vector<v1::AgentDown> Finish(grpc::Status* status) {
    stream_->WritesDone();
    std::vector<v1::AgentDown> rest;
    v1::AgentDown down;
    while (stream_->Read(&down)) rest.push_back(down);
    *status = stream_->Finish();
    return rest;
  }

 private:
  const std::string job_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentUp, v1::AgentDown>> stream_;
  uint64_t generation_ = 0;
};

std::vector<uint32_t> Ranks(const v1::AgentNotice& notice) {
  return {notice.ranks().begin(), notice.ranks().end()};
}

TEST(AgentLazyAckTest, AppliedLazyBatchesRideOnTheNextMessageAndRefusalsGetTheirOwnAck) {
  auto server = testing::StartWithLazyAckDelay(absl::Hours(1));
  ASSERT_NE(server, nullptr);
  AgentStream agent(*server, "agent-wire");

  // 3, 4 (lazy): rank 0 checks in to chunks 0 and 1; nothing completes, nothing is sent.
  agent.Stage(3, true, 0, {0});
  agent.Stage(4, true, 1, {0});
  // 5 (lazy): rank 1 completes chunk 0. One message: the directive to both ranks, answering 3 to 5.
  agent.Stage(5, true, 0, {1});
  v1::AgentDown released = agent.Read();
  EXPECT_EQ(released.acks_size(), 0);
  EXPECT_EQ(released.acked_through(), 5u);
  ASSERT_EQ(released.notices_size(), 1);
  EXPECT_EQ(released.notices(0).notice().directive().chunk(), 0u);
  EXPECT_THAT(Ranks(released.notices(0)), ElementsAre(0, 1));

  // 6 (lazy): rank 1 completes chunk 1, and rank 7 (not attached here) is rejected. Its AgentAck
  // leaves at once, in the message of the directive it released.
  agent.Stage(6, true, 1, {1, 7});
  v1::AgentDown rejected = agent.Read();
  ASSERT_EQ(rejected.acks_size(), 1);
  EXPECT_EQ(rejected.acks(0).request_id(), 6u);
  EXPECT_EQ(rejected.acks(0).code(), 0);
  ASSERT_EQ(rejected.acks(0).rejected_size(), 1);
  EXPECT_EQ(rejected.acks(0).rejected(0).index(), 1u);
  EXPECT_EQ(rejected.acks(0).rejected(0).code(),
            static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(rejected.acks(0).rejected(0).message(),
            "rank 7 of job 'agent-wire' is not attached on this agent session");
  EXPECT_LT(rejected.acked_through(), 6u);
  ASSERT_EQ(rejected.notices_size(), 1);
  EXPECT_EQ(rejected.notices(0).notice().directive().chunk(), 1u);

  // 7 (not lazy): rank 0 checks in to chunk 2; its AgentAck comes at once, alone.
  agent.Stage(7, false, 2, {0});
  v1::AgentDown eager = agent.Read();
  ASSERT_EQ(eager.acks_size(), 1);
  EXPECT_EQ(eager.acks(0).request_id(), 7u);
  EXPECT_EQ(eager.acks(0).rejected_size(), 0);
  EXPECT_EQ(eager.notices_size(), 0);
  EXPECT_EQ(eager.acked_through(), 0u);

  // 8 (lazy): rank 1 completes chunk 2; 9 (lazy): rank 0 repeats its check-in of chunk 2 (a
  // duplicate: accepted), answered only by the end of the stream.
  agent.Stage(8, true, 2, {1});
  v1::AgentDown last_release = agent.Read();
  EXPECT_EQ(last_release.acks_size(), 0);
  EXPECT_EQ(last_release.acked_through(), 8u);
  ASSERT_EQ(last_release.notices_size(), 1);
  EXPECT_EQ(last_release.notices(0).notice().directive().chunk(), 2u);
  agent.Stage(9, true, 2, {0});
  grpc::Status status;
  std::vector<v1::AgentDown> rest = agent.Finish(&status);
  EXPECT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].acks_size(), 0);
  EXPECT_EQ(rest[0].notices_size(), 0);
  EXPECT_EQ(rest[0].acked_through(), 9u);
}

// A batch of a job none of whose ranks is attached on the stream: every message refused, at once,
// nothing applied (the job's ranks 0 and 1 then still release chunk 0 together).
TEST(AgentLazyAckTest, ABatchOfAJobNotAttachedHereIsRefusedMessageByMessage) {
  auto server = testing::StartWithLazyAckDelay(absl::Milliseconds(50));
  ASSERT_NE(server, nullptr);
  AgentStream agent(*server, "agent-here");
  AgentStream other(*server, "agent-elsewhere");
  agent.Stage(3, true, 0, {0, 1}, "agent-elsewhere");
  v1::AgentDown refused = agent.Read();
  ASSERT_EQ(refused.acks_size(), 1);
  EXPECT_EQ(refused.acks(0).request_id(), 3u);
  EXPECT_EQ(refused.acks(0).code(), 0);
  ASSERT_EQ(refused.acks(0).rejected_size(), 2);
  for (uint32_t i = 0; i < 2; ++i) {
    EXPECT_EQ(refused.acks(0).rejected(i).index(), i);
    EXPECT_EQ(refused.acks(0).rejected(i).code(),
              static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
    EXPECT_EQ(refused.acks(0).rejected(i).message(),
              absl::StrCat("rank ", i,
                           " of job 'agent-elsewhere' is not attached on this agent "
                           "session"));
  }
  EXPECT_EQ(refused.notices_size(), 0);
  other.Stage(3, false, 0, {0, 1});
  v1::AgentDown released = other.Read();
  ASSERT_EQ(released.acks_size(), 1);
  EXPECT_EQ(released.acks(0).rejected_size(), 0);
  ASSERT_EQ(released.notices_size(), 1);
  EXPECT_THAT(Ranks(released.notices(0)), ElementsAre(0, 1));
  grpc::Status status;
  agent.Finish(&status);
  EXPECT_TRUE(status.ok()) << status.error_message();
  other.Finish(&status);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// A rank whose attachment here was superseded (its Session attached elsewhere) is refused here
// until it attaches here again: also after another rank of the stream was attached here again
// (which closes and replaces that rank's own attachment here) and then detached. The other rank's
// messages apply throughout.
TEST(AgentLazyAckTest, ARankSupersededElsewhereIsRefusedHereUntilItAttachesHereAgain) {
  auto server = testing::StartWithLazyAckDelay(absl::ZeroDuration());
  ASSERT_NE(server, nullptr);
  AgentStream agent(*server, "superseded");
  auto channel = grpc::CreateChannel(server->target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Coordinator::NewStub(channel);
  testing::RawSession elsewhere(stub.get());
  const v1::JoinResponse rejoined = agent.Join(0);
  ASSERT_TRUE(elsewhere.Attach("superseded", 0, rejoined.generation(), rejoined.session_id()).ok());
  const auto expect_rank_0_refused = [](const v1::AgentAck& ack) {
    ASSERT_EQ(ack.rejected_size(), 1);
    EXPECT_EQ(ack.rejected(0).index(), 0u);
    EXPECT_EQ(ack.rejected(0).code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
    EXPECT_EQ(ack.rejected(0).message(),
              "rank 0 of job 'superseded' is not attached on this agent session");
  };
  std::vector<uint32_t> closed;
  agent.Stage(3, false, 0, {0, 1});
  expect_rank_0_refused(agent.ReadAck(3, &closed));
  EXPECT_THAT(closed, ElementsAre(0));
  // Rank 1 attached here again: its older attach here is closed and replaced. Then detached.
  agent.WriteAttach(4, 1, agent.Join(1));
  EXPECT_EQ(agent.ReadAck(4, &closed).code(), 0);
  EXPECT_THAT(closed, ElementsAre(0, 1));
  agent.WriteDetach(5, 1, /*attach_request_id=*/4);
  EXPECT_EQ(agent.ReadAck(5, &closed).code(), 0);
  agent.Stage(6, false, 1, {0});
  expect_rank_0_refused(agent.ReadAck(6, &closed));
  // Both attached here again (rank 0 superseding the Session elsewhere): both apply.
  agent.WriteAttach(7, 1, agent.Join(1));
  EXPECT_EQ(agent.ReadAck(7, &closed).code(), 0);
  agent.WriteAttach(8, 0, agent.Join(0));
  EXPECT_EQ(agent.ReadAck(8, &closed).code(), 0);
  agent.Stage(9, false, 1, {0, 1});
  EXPECT_EQ(agent.ReadAck(9, &closed).rejected_size(), 0);
  EXPECT_THAT(closed, ElementsAre(0, 1));
  grpc::Status status;
  agent.Finish(&status);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST(AgentLazyAckTest, AZeroDelayAcksEveryBatchAtOnce) {
  auto server = testing::StartWithLazyAckDelay(absl::ZeroDuration());
  ASSERT_NE(server, nullptr);
  AgentStream agent(*server, "agent-eager");
  agent.Stage(3, true, 0, {0});
  v1::AgentDown first = agent.Read();
  ASSERT_EQ(first.acks_size(), 1);
  EXPECT_EQ(first.acks(0).request_id(), 3u);
  EXPECT_EQ(first.acked_through(), 0u);
  // The completing batch's AgentAck leaves with the directive it released.
  agent.Stage(4, true, 0, {1});
  v1::AgentDown released = agent.Read();
  ASSERT_EQ(released.acks_size(), 1);
  EXPECT_EQ(released.acks(0).request_id(), 4u);
  EXPECT_EQ(released.notices_size(), 1);
  EXPECT_EQ(released.acked_through(), 0u);
  grpc::Status status;
  EXPECT_TRUE(agent.Finish(&status).empty());
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST(AgentLazyAckTest, ALazyBatchThatReleasesNothingIsAnsweredByAMessageOfItsOwn) {
  // The delay passes with nothing else to send: a message with only acked_through comes.
  auto server = testing::StartWithLazyAckDelay(absl::Milliseconds(20));
  ASSERT_NE(server, nullptr);
  AgentStream agent(*server, "agent-flush");
  agent.Stage(3, true, 0, {0});
  v1::AgentDown flushed = agent.Read();
  EXPECT_EQ(flushed.acks_size(), 0);
  EXPECT_EQ(flushed.notices_size(), 0);
  EXPECT_EQ(flushed.acked_through(), 3u);
  grpc::Status status;
  EXPECT_TRUE(agent.Finish(&status).empty());
  EXPECT_TRUE(status.ok()) << status.error_message();
}

}  // namespace
}  // namespace psync
