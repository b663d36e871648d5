// StreamWriter (through SessionWriter, and over an AgentDownQueue): one write at a time in queue
// order, Finish only once the queue is drained after Close, the first Close wins, a failed write
// drops the queue, a cork holds the newest message back, and nothing happens after Detach.
//
// The reactor's stream is a fake bound through gRPC's mocking seam (ServerCallbackReaderWriter):
// StartWrite and Finish land in its journal, and the test completes each write by hand, as the
// reactor's OnWriteDone would, so every step is exact and nothing sleeps.
#include "server/stream_writer.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/agent_down_queue.h"
#include "server/session_writer.h"

namespace psync::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

template <typename Up, typename Down>
class IdleReactor final : public grpc::ServerBidiReactor<Up, Down> {
 public:
  void OnDone() override {}
};

// Records what the writer asks of the stream. Single-threaded use only.
template <typename Up, typename Down>
class FakeStream final : public grpc::ServerCallbackReaderWriter<Up, Down> {
 public:
  explicit FakeStream(grpc::ServerBidiReactor<Up, Down>* reactor) : reactor_(reactor) {
    this->BindReactor(reactor);
  }

  void Finish(grpc::Status s) override { finishes.push_back(std::move(s)); }
  void SendInitialMetadata() override {}
  void Read(Up*) override {}
  void Write(const Down* message, grpc::WriteOptions) override { writes.push_back(*message); }
  void WriteAndFinish(const Down*, grpc::WriteOptions, grpc::Status) override {
    ADD_FAILURE() << "StreamWriter never writes and finishes at once";
  }

  std::vector<Down> writes;
  std::vector<grpc::Status> finishes;

 private:
  grpc::internal::ServerReactor* reactor() override { return reactor_; }
  void CallOnDone() override {}

  grpc::ServerBidiReactor<Up, Down>* const reactor_;
};

using SessionReactor = IdleReactor<SessionUpFrame, v1::SessionDown>;
using SessionStream = FakeStream<SessionUpFrame, v1::SessionDown>;

v1::SessionDown Msg(uint64_t id) {
  v1::SessionDown m;
  m.mutable_ack()->set_request_id(id);
  return m;
}

std::vector<uint64_t> Ids(const std::vector<v1::SessionDown>& writes) {
  std::vector<uint64_t> ids;
  for (const v1::SessionDown& m : writes) ids.push_back(m.ack().request_id());
  return ids;
}

struct Finished {
  int code;
  std::string message;
  friend bool operator==(const Finished& a, const Finished& b) {
    return a.code == b.code && a.message == b.message;
  }
  friend std::ostream& operator<<(std::ostream& out, const Finished& f) {
    return out << f.code << ": " << f.message;
  }
};

std::vector<Finished> Finishes(const std::vector<grpc::Status>& finishes) {
  std::vector<Finished> out;
  for (const grpc::Status& s : finishes) {
    out.push_back({static_cast<int>(s.error_code()), s.error_message()});
  }
  return out;
}

class SessionWriterTest : public ::testing::Test {
 protected:
  SessionReactor reactor_;
  SessionStream stream_{&reactor_};
  SessionWriter writer_{&reactor_};
};

TEST_F(SessionWriterTest, WritesOneAtATimeInQueueOrder) {
  writer_.Enqueue(Msg(1));
  writer_.Enqueue(Msg(2));
  writer_.Enqueue(Msg(3));
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1));  // 2 and 3 wait for the first write
  writer_.WriteDone(true);
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1, 2));
  writer_.WriteDone(true);
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1, 2, 3));
  writer_.WriteDone(true);
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1, 2, 3));
  writer_.Enqueue(Msg(4));  // idle: starts at once
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(stream_.finishes, IsEmpty());
}

TEST_F(SessionWriterTest, CloseFinishesOnceTheQueueIsDrained) {
  writer_.Enqueue(Msg(1));
  writer_.Enqueue(Msg(2));
  writer_.Close(grpc::Status(grpc::StatusCode::ABORTED, "superseded"));
  EXPECT_THAT(stream_.finishes, IsEmpty());
  writer_.Enqueue(Msg(3));  // after Close: dropped
  writer_.WriteDone(true);
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1, 2));
  EXPECT_THAT(stream_.finishes, IsEmpty());
  writer_.WriteDone(true);
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1, 2));
  EXPECT_THAT(Finishes(stream_.finishes), ElementsAre(Finished{10, "superseded"}));
}

TEST_F(SessionWriterTest, CloseWhenIdleFinishesAtOnceAndTheFirstCloseWins) {
  writer_.Close(grpc::Status::OK);
  writer_.Close(grpc::Status(grpc::StatusCode::CANCELLED, "session cancelled"));
  EXPECT_THAT(Finishes(stream_.finishes), ElementsAre(Finished{0, ""}));
  writer_.Enqueue(Msg(1));
  EXPECT_THAT(stream_.writes, IsEmpty());
}

TEST_F(SessionWriterTest, FirstCloseWinsWhileWriting) {
  writer_.Enqueue(Msg(1));
  writer_.Close(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "first"));
  writer_.Close(grpc::Status(grpc::StatusCode::CANCELLED, "second"));
  writer_.WriteDone(true);
  EXPECT_THAT(Finishes(stream_.finishes), ElementsAre(Finished{3, "first"}));
}

TEST_F(SessionWriterTest, FailedWriteDropsTheQueueAndFinishesCancelled) {
  writer_.Enqueue(Msg(1));
  writer_.Enqueue(Msg(2));
  writer_.Enqueue(Msg(3));
  writer_.WriteDone(false);  // the peer is gone
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1));
  EXPECT_THAT(Finishes(stream_.finishes), ElementsAre(Finished{1, "write failed: peer gone"}));
  writer_.Close(grpc::Status(grpc::StatusCode::ABORTED, "late"));  // already closing
  writer_.Enqueue(Msg(4));
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1));
  EXPECT_EQ(stream_.finishes.size(), 1u);
}

TEST_F(SessionWriterTest, FailedWriteAfterCloseKeepsTheCloseStatus) {
  writer_.Enqueue(Msg(1));
  writer_.Enqueue(Msg(2));
  writer_.Close(grpc::Status(grpc::StatusCode::ABORTED, "superseded"));
  writer_.WriteDone(false);
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1));
  EXPECT_THAT(Finishes(stream_.finishes), ElementsAre(Finished{10, "superseded"}));
}

TEST_F(SessionWriterTest, CorkHoldsTheNewestMessageBack) {
  writer_.Cork();
  writer_.Enqueue(Msg(1));
  EXPECT_THAT(stream_.writes, IsEmpty());
  writer_.Enqueue(Msg(2));  // 1 is no longer the newest: it may leave
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1));
  writer_.WriteDone(true);
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1));  // 2 is the newest
  // Corks nest.
  writer_.Cork();
  writer_.Uncork();
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1));
  writer_.Uncork();
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1, 2));
}

TEST_F(SessionWriterTest, CloseWhileCorkedFinishesAfterUncorkAndDrain) {
  writer_.Cork();
  writer_.Enqueue(Msg(1));
  writer_.Close(grpc::Status::OK);
  EXPECT_THAT(stream_.writes, IsEmpty());
  EXPECT_THAT(stream_.finishes, IsEmpty());
  writer_.Uncork();
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1));
  EXPECT_THAT(stream_.finishes, IsEmpty());
  writer_.WriteDone(true);
  EXPECT_THAT(Finishes(stream_.finishes), ElementsAre(Finished{0, ""}));
}

TEST_F(SessionWriterTest, NothingHappensAfterDetach) {
  writer_.Enqueue(Msg(1));
  writer_.Enqueue(Msg(2));
  writer_.Detach();  // OnDone: the reactor is going away
  writer_.Enqueue(Msg(3));
  writer_.WriteDone(true);
  writer_.Close(grpc::Status::OK);
  writer_.Cork();
  writer_.Uncork();
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1));
  EXPECT_THAT(stream_.finishes, IsEmpty());
}

// What an AgentSession's outbox does while the coordinator hands out one decision's notices:
// corked, the queue merges them into one message, which leaves at Uncork.
TEST(AgentStreamWriterTest, CorkedNoticesLeaveAsOneMessage) {
  using Up = v1::AgentUp;
  using Down = v1::AgentDown;
  IdleReactor<Up, Down> reactor;
  FakeStream<Up, Down> stream(&reactor);
  StreamWriter<Up, Down, AgentDownQueue> writer(&reactor, "agent");

  v1::SessionDown directive;
  directive.mutable_directive()->set_generation(1);
  directive.mutable_directive()->set_chunk(2);
  writer.Cork();
  writer.Add([&](AgentDownQueue& q) {
    v1::AgentAck ack;
    ack.set_request_id(9);
    q.AddAck(std::move(ack));
  });
  for (core::RankId rank : {0u, 1u, 3u}) {
    writer.Add([&](AgentDownQueue& q) { q.AddNotice("job", rank, directive); });
  }
  EXPECT_THAT(stream.writes, IsEmpty());
  writer.Uncork();
  ASSERT_EQ(stream.writes.size(), 1u);
  const v1::AgentDown& down = stream.writes[0];
  ASSERT_EQ(down.acks_size(), 1);
  EXPECT_EQ(down.acks(0).request_id(), 9u);
  ASSERT_EQ(down.notices_size(), 1);
  EXPECT_EQ(down.notices(0).job_id(), "job");
  EXPECT_THAT(down.notices(0).ranks(), ElementsAre(0, 1, 3));
  EXPECT_EQ(down.notices(0).notice().directive().chunk(), 2u);

  writer.Close(grpc::Status(grpc::StatusCode::CANCELLED, "agent session cancelled"));
  EXPECT_THAT(stream.finishes, IsEmpty());  // the write is still in flight
  writer.WriteDone(true);
  EXPECT_THAT(Finishes(stream.finishes), ElementsAre(Finished{1, "agent session cancelled"}));
}

TEST(AgentStreamWriterTest, FailedWriteNamesThePeer) {
  using Up = v1::AgentUp;
  using Down = v1::AgentDown;
  IdleReactor<Up, Down> reactor;
  FakeStream<Up, Down> stream(&reactor);
  StreamWriter<Up, Down, AgentDownQueue> writer(&reactor, "agent");
  writer.Add([](AgentDownQueue& q) { q.AddAck(v1::AgentAck()); });
  writer.WriteDone(false);
  EXPECT_THAT(Finishes(stream.finishes), ElementsAre(Finished{1, "write failed: agent gone"}));
}

}  // namespace
}  // namespace psync::server
