// StreamWriter (through SessionWriter, and over an serve::AgentDownQueue): one write at a time in
// queue order, Finish only once the queue is drained after Close, the first Close wins, a failed
// write drops the queue, a cork holds the newest message back, and nothing happens after Detach.
// Flow control: over the bound reading pauses and resumes once drained; over it past the deadline
// (a FakeClock, the timer fired by hand) the stream ends with RESOURCE_EXHAUSTED.
//
// The reactor's stream is a fake bound through gRPC's mocking seam (ServerCallbackReaderWriter):
// StartWrite and Finish land in its journal, and the test completes each write by hand, as the
// reactor's OnWriteDone would, so every step is exact and nothing sleeps.
#include "serve/stream_writer.h"

#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serve/agent_down_queue.h"
#include "serve/session_writer.h"

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

using SessionReactor = IdleReactor<wire::SessionUpFrame, v1::SessionDown>;
using SessionStream = FakeStream<wire::SessionUpFrame, v1::SessionDown>;

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
  serve::SessionWriter writer_{&reactor_};
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

// acked_through of each write, in order.
std::vector<uint64_t> AckedThrough(const std::vector<v1::SessionDown>& writes) {
  std::vector<uint64_t> through;
  for (const v1::SessionDown& m : writes) through.push_back(m.acked_through());
  return through;
}

TEST_F(SessionWriterTest, LazyAcksRideOnTheNextMessageWritten) {
  // Idle: nothing is written for a lazy ack, and the caller is told to arm a flush.
  EXPECT_TRUE(writer_.AckLater(1));
  EXPECT_FALSE(writer_.AckLater(2));  // already pending: the armed flush covers it
  EXPECT_THAT(stream_.writes, IsEmpty());
  // The next message carries both.
  writer_.Enqueue(Msg(3));
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(3));
  EXPECT_THAT(AckedThrough(stream_.writes), ElementsAre(2));
  // While a write is in flight, a lazy ack waits for the next message queued.
  EXPECT_TRUE(writer_.AckLater(4));
  writer_.Enqueue(Msg(5));
  EXPECT_FALSE(writer_.AckLater(6));  // a queued message will carry it: no flush needed
  writer_.WriteDone(true);
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(3, 5));
  EXPECT_THAT(AckedThrough(stream_.writes), ElementsAre(2, 6));
  // A flush with nothing pending writes nothing.
  writer_.WriteDone(true);
  writer_.FlushLazyAcks();
  EXPECT_EQ(stream_.writes.size(), 2u);
}

TEST_F(SessionWriterTest, AFlushWritesPendingLazyAcksAloneAndCloseSaysThemFirst) {
  EXPECT_TRUE(writer_.AckLater(7));
  writer_.FlushLazyAcks();
  ASSERT_EQ(stream_.writes.size(), 1u);
  EXPECT_EQ(stream_.writes[0].kind_case(), v1::SessionDown::KIND_NOT_SET);
  EXPECT_EQ(stream_.writes[0].acked_through(), 7u);
  writer_.WriteDone(true);
  // A flush while the carrier is queued behind a write adds nothing: the carrier takes it.
  writer_.Enqueue(Msg(8));
  EXPECT_TRUE(writer_.AckLater(9));
  writer_.Enqueue(Msg(10));
  writer_.FlushLazyAcks();
  writer_.WriteDone(true);
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(0, 8, 10));
  EXPECT_THAT(AckedThrough(stream_.writes), ElementsAre(7, 0, 9));
}

TEST_F(SessionWriterTest, ARefusalIsNeverOvertakenByALaterAcceptance) {
  writer_.Enqueue(Msg(1));            // in flight
  EXPECT_TRUE(writer_.AckLater(2));   // nothing queued: waits
  writer_.Enqueue(Msg(3));            // a refusal's Ack: takes 2 along
  EXPECT_FALSE(writer_.AckLater(4));  // rides on the newest queued message, the refusal's Ack
  writer_.Enqueue(Msg(5));
  writer_.WriteDone(true);
  writer_.WriteDone(true);
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1, 3, 5));
  EXPECT_THAT(AckedThrough(stream_.writes), ElementsAre(0, 4, 0));
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
  serve::StreamWriter<Up, Down, serve::AgentDownQueue> writer(&reactor, "agent");

  v1::SessionDown directive;
  directive.mutable_directive()->set_generation(1);
  directive.mutable_directive()->set_chunk(2);
  writer.Cork();
  writer.Add([&](serve::AgentDownQueue& q) {
    v1::AgentAck ack;
    ack.set_request_id(9);
    q.AddAck(std::move(ack));
  });
  for (uint32_t rank : {0u, 1u, 3u}) {
    writer.Add([&](serve::AgentDownQueue& q) { q.AddNotice("job", rank, directive); });
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
  serve::StreamWriter<Up, Down, serve::AgentDownQueue> writer(&reactor, "agent");
  writer.Add([](serve::AgentDownQueue& q) { q.AddAck(v1::AgentAck()); });
  writer.WriteDone(false);
  EXPECT_THAT(Finishes(stream.finishes), ElementsAre(Finished{1, "write failed: agent gone"}));
}

// The wait observer: each write reports how long its oldest content waited since it was queued.
TEST(StreamWriterWaitTest, EachWriteReportsHowLongItsMessageWaitedInTheQueue) {
  SessionReactor reactor;
  SessionStream stream(&reactor);
  serve::FakeClock clock;
  serve::SessionWriter writer(&reactor, serve::StreamLimits{}, &clock);
  std::vector<absl::Duration> waits;
  writer.SetWaitObserver([&](absl::Duration waited) { waits.push_back(waited); });

  writer.Enqueue(Msg(1));  // idle: written at once
  clock.Advance(absl::Milliseconds(1));
  writer.Enqueue(Msg(2));
  clock.Advance(absl::Milliseconds(2));
  writer.Enqueue(Msg(3));
  clock.Advance(absl::Milliseconds(7));
  writer.WriteDone(true);  // 2 starts after 9 ms in the queue
  clock.Advance(absl::Milliseconds(5));
  writer.WriteDone(true);  // 3 after 12 ms
  EXPECT_THAT(Ids(stream.writes), ElementsAre(1, 2, 3));
  EXPECT_THAT(waits,
              ElementsAre(absl::ZeroDuration(), absl::Milliseconds(9), absl::Milliseconds(12)));
  // A failed write drops what is queued, and its times with it.
  writer.Enqueue(Msg(4));
  writer.WriteDone(false);
  writer.WriteDone(true);
  EXPECT_EQ(waits.size(), 3u);
}

TEST(StreamWriterWaitTest, AMergedMessageIsAsOldAsTheAddThatOpenedIt) {
  using Up = v1::AgentUp;
  using Down = v1::AgentDown;
  IdleReactor<Up, Down> reactor;
  FakeStream<Up, Down> stream(&reactor);
  serve::FakeClock clock;
  serve::StreamWriter<Up, Down, serve::AgentDownQueue> writer(&reactor, "agent",
                                                              serve::StreamLimits{}, &clock);
  std::vector<absl::Duration> waits;
  writer.SetWaitObserver([&](absl::Duration waited) { waits.push_back(waited); });
  v1::SessionDown directive;
  directive.mutable_directive()->set_chunk(2);

  writer.Add([](serve::AgentDownQueue& q) { q.AddAck(v1::AgentAck()); });  // written at once
  clock.Advance(absl::Milliseconds(1));
  writer.Add([&](serve::AgentDownQueue& q) { q.AddNotice("job", 0, directive); });
  clock.Advance(absl::Milliseconds(3));
  writer.Add([&](serve::AgentDownQueue& q) { q.AddNotice("job", 1, directive); });  // merges
  clock.Advance(absl::Milliseconds(4));
  writer.WriteDone(true);
  ASSERT_EQ(stream.writes.size(), 2u);
  EXPECT_THAT(stream.writes[1].notices(0).ranks(), ElementsAre(0, 1));
  EXPECT_THAT(waits, ElementsAre(absl::ZeroDuration(), absl::Milliseconds(7)));
}

TEST(StreamWriterWaitTest, EachCompletedWriteIsTimedFromItsStart) {
  SessionReactor reactor;
  SessionStream stream(&reactor);
  serve::FakeClock clock;
  serve::SessionWriter writer(&reactor, serve::StreamLimits{}, &clock);
  std::vector<absl::Duration> writes;
  writer.SetWriteObserver([&](absl::Duration took) { writes.push_back(took); });

  writer.Enqueue(Msg(1));  // starts at once
  clock.Advance(absl::Milliseconds(3));
  writer.Enqueue(Msg(2));  // queued behind it
  clock.Advance(absl::Milliseconds(4));
  writer.WriteDone(true);  // 1 took 7 ms; 2 starts now
  clock.Advance(absl::Milliseconds(2));
  writer.WriteDone(true);  // 2 took 2 ms, not counting its 4 ms in the queue
  EXPECT_THAT(Ids(stream.writes), ElementsAre(1, 2));
  EXPECT_THAT(writes, ElementsAre(absl::Milliseconds(7), absl::Milliseconds(2)));
  // A failed write is not timed.
  writer.Enqueue(Msg(3));
  clock.Advance(absl::Milliseconds(1));
  writer.WriteDone(false);
  EXPECT_EQ(writes.size(), 2u);
}

// Flow control. Each Msg() counts QueuedBytes(Msg(1)) bytes; the bound holds two of them.
class BoundedSessionWriterTest : public ::testing::Test {
 protected:
  static size_t One() { return serve::QueuedBytes(Msg(1)); }

  BoundedSessionWriterTest()
      : writer_(&reactor_, serve::StreamLimits{2 * One(), absl::Seconds(10), 0, &counters_},
                &clock_, [this](absl::Duration after) { armed_.push_back(after); }) {
    writer_.SetResumeRead([this] { ++resumed_; });
  }

  SessionReactor reactor_;
  SessionStream stream_{&reactor_};
  serve::FakeClock clock_;
  serve::StreamCounters counters_;
  std::vector<absl::Duration> armed_;
  int resumed_ = 0;
  serve::SessionWriter writer_;
};

TEST_F(BoundedSessionWriterTest, ReadingPausesOverTheBoundAndResumesOnceDrained) {
  // A peer that never reads: the first write never completes, the rest queue.
  writer_.Enqueue(Msg(1));  // in flight: not in the queue
  writer_.Enqueue(Msg(2));
  writer_.Enqueue(Msg(3));
  EXPECT_EQ(writer_.queued_bytes(), 2 * One());
  EXPECT_TRUE(writer_.ReadAllowed());  // at the bound, not over it
  EXPECT_THAT(armed_, IsEmpty());
  writer_.Enqueue(Msg(4));
  EXPECT_FALSE(writer_.ReadAllowed());
  EXPECT_EQ(counters_.reads_paused.load(), 1u);
  EXPECT_THAT(armed_, ElementsAre(absl::Seconds(10)));
  // Notices are never dropped while the stream lives: still queued over the bound.
  writer_.Enqueue(Msg(5));
  EXPECT_EQ(writer_.queued_bytes(), 4 * One());
  writer_.WriteDone(true);  // 2 leaves: 3 queued, still over
  writer_.WriteDone(true);  // 3 leaves: 2 queued, at the bound
  EXPECT_EQ(resumed_, 1);
  writer_.WriteDone(true);
  EXPECT_EQ(resumed_, 1);  // resumed once, not at every write
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(stream_.finishes, IsEmpty());
}

TEST_F(BoundedSessionWriterTest, OverTheBoundPastTheDeadlineEndsWithResourceExhausted) {
  for (uint64_t id = 1; id <= 4; ++id) writer_.Enqueue(Msg(id));
  ASSERT_FALSE(writer_.ReadAllowed());
  ASSERT_THAT(armed_, ElementsAre(absl::Seconds(10)));
  clock_.Advance(absl::Seconds(4));
  EXPECT_FALSE(writer_.CheckOverflow());  // early: asks again for the time left
  EXPECT_THAT(armed_, ElementsAre(absl::Seconds(10), absl::Seconds(6)));
  clock_.Advance(absl::Seconds(6));
  EXPECT_TRUE(writer_.CheckOverflow());
  // Finished at once, though write 1 never completed (the peer does not read); the queue is gone.
  ASSERT_EQ(stream_.finishes.size(), 1u);
  EXPECT_EQ(stream_.finishes[0].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(stream_.finishes[0].error_message(), "--stream_queue_bytes"))
      << stream_.finishes[0].error_message();
  EXPECT_EQ(writer_.queued_bytes(), 0u);
  EXPECT_EQ(counters_.overflows.load(), 1u);
  writer_.Enqueue(Msg(5));  // dropped
  writer_.WriteDone(true);  // the late completion of write 1: nothing more
  EXPECT_FALSE(writer_.CheckOverflow());
  EXPECT_THAT(Ids(stream_.writes), ElementsAre(1));
  EXPECT_EQ(stream_.finishes.size(), 1u);
  EXPECT_EQ(resumed_, 0);  // a finished stream does not read again
}

TEST_F(BoundedSessionWriterTest, TheDeadlineCountsFromTheLastTimeTheQueueWentOver) {
  for (uint64_t id = 1; id <= 4; ++id) writer_.Enqueue(Msg(id));
  ASSERT_FALSE(writer_.ReadAllowed());
  clock_.Advance(absl::Seconds(8));
  writer_.WriteDone(true);  // drained to the bound: no longer over
  EXPECT_EQ(resumed_, 1);
  writer_.Enqueue(Msg(5));  // over again, at t = 8 s; the timer armed at t = 0 is still pending
  EXPECT_THAT(armed_, ElementsAre(absl::Seconds(10)));
  clock_.Advance(absl::Seconds(2));
  EXPECT_FALSE(writer_.CheckOverflow());  // over for 2 s only
  EXPECT_THAT(armed_, ElementsAre(absl::Seconds(10), absl::Seconds(8)));
  EXPECT_THAT(stream_.finishes, IsEmpty());
  clock_.Advance(absl::Seconds(8));
  EXPECT_TRUE(writer_.CheckOverflow());
}

TEST_F(BoundedSessionWriterTest, ATimerAfterTheQueueDrainedDoesNothing) {
  for (uint64_t id = 1; id <= 4; ++id) writer_.Enqueue(Msg(id));
  for (int i = 0; i < 4; ++i) writer_.WriteDone(true);
  clock_.Advance(absl::Minutes(1));
  EXPECT_FALSE(writer_.CheckOverflow());
  EXPECT_THAT(armed_, ElementsAre(absl::Seconds(10)));
  EXPECT_THAT(stream_.finishes, IsEmpty());
}

TEST(SessionDownQueueTest, BytesFollowWhatIsQueued) {
  serve::SessionDownQueue q;
  EXPECT_EQ(q.bytes(), 0u);
  v1::SessionDown big = Msg(1);
  big.mutable_ack()->set_message(std::string(1000, 'x'));
  q.Push(big);
  q.Push(Msg(2));
  EXPECT_EQ(q.bytes(), serve::QueuedBytes(big) + serve::QueuedBytes(Msg(2)));
  EXPECT_GT(q.bytes(), 1000u + 2 * serve::kQueuedMessageOverhead);
  q.Take();
  EXPECT_EQ(q.bytes(), serve::QueuedBytes(Msg(2)));
  q.Clear();
  EXPECT_EQ(q.bytes(), 0u);
}

TEST(AgentDownQueueBytesTest, BytesFollowWhatIsQueuedAndReturnToZero) {
  serve::AgentDownQueue q;
  v1::SessionDown directive;
  directive.mutable_directive()->set_generation(1);
  v1::AgentAck ack;
  ack.set_request_id(1);
  ack.set_message(std::string(500, 'x'));
  q.AddAck(ack);
  const size_t after_ack = q.bytes();
  EXPECT_GE(after_ack, 500u + serve::kQueuedMessageOverhead);
  q.AddNotice("job", 0, directive);
  const size_t after_notice = q.bytes();
  EXPECT_GT(after_notice, after_ack);
  q.AddNotice("job", 1, directive);  // merged: a rank more
  EXPECT_EQ(q.bytes(), after_notice + 8);
  v1::AgentRankClosed closed;
  closed.set_job_id("job");
  q.AddClosed(closed);
  EXPECT_GT(q.bytes(), after_notice + 8);
  while (!q.empty()) q.Take();
  EXPECT_EQ(q.bytes(), 0u);
}

// The agent stream's writer is bounded the same way.
TEST(AgentStreamWriterTest, PausesAndOverflowsLikeASession) {
  using Up = v1::AgentUp;
  using Down = v1::AgentDown;
  IdleReactor<Up, Down> reactor;
  FakeStream<Up, Down> stream(&reactor);
  serve::FakeClock clock;
  std::vector<absl::Duration> armed;
  serve::StreamWriter<Up, Down, serve::AgentDownQueue> writer(
      &reactor, "agent", serve::StreamLimits{1000, absl::Seconds(1)}, &clock,
      [&](absl::Duration after) { armed.push_back(after); });
  auto add_ack = [&](uint64_t id) {
    writer.Add([&](serve::AgentDownQueue& q) {
      v1::AgentAck ack;
      ack.set_request_id(id);
      ack.set_message(std::string(400, 'x'));
      q.AddAck(std::move(ack));
    });
  };
  add_ack(1);  // in flight
  add_ack(2);
  add_ack(3);
  EXPECT_TRUE(writer.ReadAllowed());  // merged into one message of about 950 bytes
  add_ack(4);
  EXPECT_FALSE(writer.ReadAllowed());
  ASSERT_THAT(armed, ElementsAre(absl::Seconds(1)));
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(writer.CheckOverflow());
  ASSERT_EQ(stream.finishes.size(), 1u);
  EXPECT_EQ(stream.finishes[0].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

}  // namespace
}  // namespace psync::server
