// Tests of ReconnectingStream with a scripted Session service: what is written on each stream, in
// which order, and what is written again after a stream breaks.
#include "client/reconnecting_stream.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync {
namespace {

using v1::SessionDown;
using v1::SessionUp;

// A Session service that records the request ids of every stream and, per stream, answers the
// ids in `acked` with an Ack, and ends stream k after reading `end_after[k]` messages (0: never).
class ScriptedService final : public v1::Coordinator::Service {
 public:
  grpc::Status Session(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<SessionDown, SessionUp>* stream) override {
    size_t index;
    {
      absl::MutexLock lock(&mu_);
      index = streams_.size();
      streams_.emplace_back();
    }
    SessionUp up;
    while (stream->Read(&up)) {
      size_t end_after = 0;
      bool ack = false;
      {
        absl::MutexLock lock(&mu_);
        streams_[index].push_back(up.request_id());
        ack = acked_.count(up.request_id()) > 0;
        if (index < end_after_.size()) end_after = end_after_[index];
        if (end_after != 0 && streams_[index].size() >= end_after) {
          return grpc::Status(grpc::StatusCode::UNAVAILABLE, "scripted end");
        }
      }
      if (ack) {
        SessionDown down;
        down.mutable_ack()->set_request_id(up.request_id());
        stream->Write(down);
      }
    }
    return grpc::Status::OK;
  }

  void Script(std::vector<size_t> end_after, std::vector<uint64_t> acked) {
    absl::MutexLock lock(&mu_);
    end_after_ = std::move(end_after);
    acked_.insert(acked.begin(), acked.end());
  }
  // Waits until stream `index` read `n` messages; returns the ids every stream read.
  std::vector<std::vector<uint64_t>> Await(size_t index, size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return streams_.size() > index && streams_[index].size() >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return streams_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::vector<uint64_t>> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> end_after_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> acked_ ABSL_GUARDED_BY(mu_);
};

// Opens each stream with one handshake message (id 1000 + stream number), established at once
// unless `hold_handshake`; records the ids of the Acks it reads.
class RecordingProtocol final : public StreamProtocol<SessionUp, SessionDown> {
 public:
  absl::Status Prepare(bool* retry) override {
    *retry = true;
    return absl::OkStatus();
  }
  std::vector<SessionUp> OnOpen(bool* handshake) override {
    *handshake = true;
    SessionUp attach;
    absl::MutexLock lock(&mu_);
    attach.set_request_id(1000 + opened_++);
    return {attach};
  }
  void OnRead(const SessionDown& down) override {
    absl::MutexLock lock(&mu_);
    acks_.push_back(down.ack().request_id());
  }
  absl::Status OnClosed(const StreamEnd& end, bool* retry) override {
    *retry = true;
    absl::MutexLock lock(&mu_);
    ends_.push_back(end);
    return end.finished;
  }
  std::vector<StreamEnd> ends() {
    absl::MutexLock lock(&mu_);
    return ends_;
  }

 private:
  absl::Mutex mu_;
  int opened_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> acks_ ABSL_GUARDED_BY(mu_);
  std::vector<StreamEnd> ends_ ABSL_GUARDED_BY(mu_);
};

class ReconnectingStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
    stub_ = v1::Coordinator::NewStub(channel_);
  }
  void TearDown() override { server_->Shutdown(absl::ToChronoTime(absl::Now())); }

  std::unique_ptr<ReconnectingStream<SessionUp, SessionDown>> Make(
      absl::Duration handshake_timeout = absl::Seconds(30)) {
    ReconnectingStreamOptions options;
    options.backoff.initial = absl::Milliseconds(1);
    options.backoff.max = absl::Milliseconds(5);
    options.handshake_timeout = handshake_timeout;
    return std::make_unique<ReconnectingStream<SessionUp, SessionDown>>(
        options, [this](grpc::ClientContext* c) { return stub_->Session(c); }, &protocol_);
  }
  static SessionUp Up(uint64_t id) {
    SessionUp up;
    up.set_request_id(id);
    return up;
  }

  ScriptedService service_;
  RecordingProtocol protocol_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

TEST(ResetsBackoffTest, OnlyAStreamThePeerAnsweredOrThatLastedStartsTheDelaysAgain) {
  const absl::Duration max = absl::Seconds(2);
  StreamEnd answered;
  answered.established = true;
  answered.received = true;
  EXPECT_TRUE(ResetsBackoff(answered, absl::Milliseconds(10), max));
  // Established at once (no handshake, as a node agent's stream) but never answered: the peer is
  // down or refusing, and the delays keep growing.
  StreamEnd silent;
  silent.established = true;
  EXPECT_FALSE(ResetsBackoff(silent, absl::Milliseconds(10), max));
  // A handshake that never completed, however answered.
  StreamEnd refused;
  refused.received = true;
  EXPECT_FALSE(ResetsBackoff(refused, absl::Milliseconds(10), max));
  // Open longer than the backoff's maximum: it worked for a while.
  EXPECT_TRUE(ResetsBackoff(silent, absl::Seconds(3), max));
}

TEST(IsTransientStreamEndTest, ResourceExhaustedOfAnEstablishedStreamIsRetried) {
  const absl::Status overflow = absl::ResourceExhaustedError("outbound queue over 1048576 bytes");
  EXPECT_TRUE(IsTransientStreamEnd(overflow, /*established=*/true));
  EXPECT_FALSE(IsTransientStreamEnd(overflow, /*established=*/false));  // a refused attach
  EXPECT_FALSE(IsTransientFailure(overflow));  // a refused Join stays final
  EXPECT_TRUE(IsTransientStreamEnd(absl::UnavailableError("gone"), false));
  EXPECT_FALSE(IsTransientStreamEnd(absl::InvalidArgumentError("bad"), true));
  // A message over the coordinator's size limit would be refused again: final.
  EXPECT_FALSE(IsTransientStreamEnd(
      absl::ResourceExhaustedError("session: Received message larger than max (2097152 vs. "
                                   "1048576)"),
      /*established=*/true));
}

TEST_F(ReconnectingStreamTest, NothingButTheHandshakeIsWrittenBeforeEstablished) {
  auto stream = Make();
  stream->Send(1, Up(1), Delivery::kTracked);
  stream->Start();
  auto streams = service_.Await(0, 1);
  ASSERT_EQ(streams.size(), 1u);
  EXPECT_EQ(streams[0], (std::vector<uint64_t>{1000}));
  stream->Established();
  streams = service_.Await(0, 2);
  EXPECT_EQ(streams[0], (std::vector<uint64_t>{1000, 1}));
  stream->Close(absl::Seconds(1));
}

TEST_F(ReconnectingStreamTest, UnacknowledgedTrackedMessagesAreWrittenAgainInSendOrder) {
  // Stream 0 ends after reading the handshake and four messages; only id 2 is acknowledged.
  service_.Script({5}, {2});
  auto stream = Make();
  stream->Start();
  service_.Await(0, 1);  // the handshake is written; the stream is open
  stream->Established();
  stream->Send(1, Up(1), Delivery::kTracked);
  stream->Send(2, Up(2), Delivery::kTracked);
  stream->Send(3, Up(3), Delivery::kOnce);
  stream->Send(4, Up(4), Delivery::kTracked);
  service_.Await(0, 5);
  // The sender settles id 2 when its Ack arrives (before the next stream: the stream waits for
  // Established() again, and id 2 is checked when it is due).
  EXPECT_TRUE(stream->Acknowledge(2));
  EXPECT_FALSE(stream->Acknowledge(3));  // kOnce messages are not tracked
  auto streams = service_.Await(1, 1);
  ASSERT_GE(streams.size(), 2u);
  EXPECT_EQ(streams[0], (std::vector<uint64_t>{1000, 1, 2, 3, 4}));
  stream->Established();
  streams = service_.Await(1, 3);
  // The new handshake first, then what was not acknowledged, in the order it was sent; the kOnce
  // message and the acknowledged one are not written again.
  EXPECT_EQ(streams[1], (std::vector<uint64_t>{1001, 1, 4}));
  EXPECT_EQ(stream->resent(), 2u);
  stream->Close(absl::Seconds(1));
  std::vector<StreamEnd> ends = protocol_.ends();
  ASSERT_GE(ends.size(), 1u);
  EXPECT_EQ(ends[0].finished.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(ends[0].established);
  EXPECT_TRUE(ends[0].received);  // id 2's Ack
}

TEST_F(ReconnectingStreamTest, AStreamNotEstablishedInTimeIsCancelledAndOpenedAgain) {
  auto stream = Make(absl::Milliseconds(50));
  stream->Start();
  auto streams = service_.Await(1, 1);
  ASSERT_GE(streams.size(), 2u);
  EXPECT_EQ(streams[1], (std::vector<uint64_t>{1001}));
  std::vector<StreamEnd> ends = protocol_.ends();
  ASSERT_GE(ends.size(), 1u);
  EXPECT_TRUE(ends[0].handshake_timed_out);
  EXPECT_FALSE(ends[0].established);
  EXPECT_FALSE(ends[0].received);
  EXPECT_EQ(ends[0].finished.code(), absl::StatusCode::kCancelled);
  stream->Close(absl::ZeroDuration());
}

}  // namespace
}  // namespace psync
