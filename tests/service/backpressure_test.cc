// Flow control over real gRPC (stream_writer.h): a Session that writes and never reads is paused
// once its answers queue past the bound, then ended with RESOURCE_EXHAUSTED past the overflow
// deadline, and detached from the coordinator at once (not when it reads its status); meanwhile
// another rank's release flows, and the flooding rank, attaching again, gets its pending directive.
// A WatchEvents watcher that never reads is ended with RESOURCE_EXHAUSTED.
//
// Nothing sleeps and hopes: the test waits on the server's stream counters (conditions), with a
// generous cap that only bounds a failing run.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/service/raw_session.h"
#include "tests/service/service_fixture.h"
#include "wire/wire_status.h"

namespace psync::testing {
namespace {

constexpr size_t kQueueBytes = 4096;

// Waits until `condition` holds; false if it did not within a minute (a failing run).
template <typename F>
bool WaitFor(F condition) {
  const absl::Time give_up = absl::Now() + absl::Minutes(1);
  while (!condition()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

class BackpressureTest : public ServiceFixture {
 protected:
  void SetUp() override {
    server::ServerOptions options;
    options.clock = &clock_;
    options.streams.queue_bytes = kQueueBytes;
    options.streams.overflow_deadline = absl::Milliseconds(200);
    options.streams.watch_queue_bytes = kQueueBytes;
    auto server = server::TestServer::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    stub_ = v1::Coordinator::NewStub(channel_);
    // The clients that do not read: without BDP probing their receive window stays at HTTP/2's
    // 64 KiB, so the server's writes stall after that much (not after many MiB).
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    idle_stub_ = v1::Coordinator::NewStub(
        grpc::CreateCustomChannel(server_->target(), grpc::InsecureChannelCredentials(), args));
  }

  std::unique_ptr<v1::Coordinator::Stub> idle_stub_;

  const serve::StreamCounters& counters() { return server_->stream_counters(); }

  // JobStatus.sessions_connected of `job` (99 when the status cannot be read).
  uint32_t SessionsConnected(const std::string& job) {
    grpc::ClientContext context;
    v1::GetJobStatusRequest request;
    request.set_job_id(job);
    v1::JobStatus status;
    return stub_->GetJobStatus(&context, request, &status).ok() ? status.sessions_connected() : 99;
  }

  static v1::SessionUp StagedUp(uint64_t id, uint64_t generation,
                                const std::string& optimizer = "dense") {
    v1::SessionUp up;
    up.set_request_id(id);
    up.mutable_staged()->set_generation(generation);
    v1::Staged* s = up.mutable_staged()->add_items();
    s->set_step(0);
    s->set_chunk(0);
    s->set_optimizer(optimizer);
    return up;
  }
};

TEST_F(BackpressureTest, ASessionThatNeverReadsIsPausedThenEndedAndGetsItsDirectiveOnReattach) {
  v1::JoinResponse joined0, joined1;
  std::unique_ptr<RawSession> rank1 = JoinAndAttach(MakeJoin("bp", 2, 1, 1), &joined1);
  // Rank 0's stream is driven by hand: attach, stage, then flood without reading.
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Join(&context, MakeJoin("bp", 2, 0, 1), &joined0).ok());
  }
  grpc::ClientContext flood_context;
  auto flood = idle_stub_->Session(&flood_context);
  {
    v1::SessionUp attach;
    attach.set_request_id(1);
    attach.mutable_attach()->set_job_id("bp");
    attach.mutable_attach()->set_rank(0);
    attach.mutable_attach()->set_generation(joined0.generation());
    attach.mutable_attach()->set_session_id(joined0.session_id());
    ASSERT_TRUE(flood->Write(attach));
    ASSERT_TRUE(flood->Write(StagedUp(2, joined0.generation())));
    v1::SessionDown down;
    int acks = 0;
    while (acks < 2 && flood->Read(&down)) acks += down.has_ack() ? 1 : 0;
    ASSERT_EQ(acks, 2);
  }
  // A check-in of an optimizer the rank never declared, again and again: refused (nothing
  // changes) with a message that quotes the name, cut to kMaxEchoedBytes. Never reading.
  const std::string long_name(1 << 16, 'x');
  std::atomic<uint64_t> written{0};
  std::thread writer([&] {
    for (uint64_t id = 3;; ++id) {
      if (!flood->Write(StagedUp(id, joined0.generation(), long_name))) return;
      written.fetch_add(1);
    }
  });
  ASSERT_TRUE(WaitFor([&] { return counters().reads_paused.load() >= 1; }));

  // While rank 0 floods, rank 1's check-in releases the chunk and its directive arrives.
  ASSERT_TRUE(rank1->Stage(joined1.generation(), 0, 0, "dense").ok());
  v1::SessionDown directive;
  ASSERT_TRUE(rank1->ReadNotice(&directive));
  ASSERT_TRUE(directive.has_directive()) << directive.DebugString();
  EXPECT_EQ(directive.directive().step(), 0u);

  // Rank 0's queue stays over the bound: its stream is ended.
  ASSERT_TRUE(WaitFor([&] { return counters().overflows.load() >= 1; }));
  // The coordinator lets go of rank 0 then, without waiting for a peer that does not read to take
  // the status from behind its flow-controlled data: one Session connected (rank 1's), and rank
  // 0 is detached (its rank lease runs) while its stream still holds unread answers.
  EXPECT_TRUE(WaitFor([&] { return SessionsConnected("bp") == 1u; }))
      << "sessions_connected " << SessionsConnected("bp");
  // Draining what the transport held shows the end: fewer answers than messages written.
  uint64_t answers = 0;
  v1::SessionDown down;
  while (flood->Read(&down)) {
    if (!down.has_ack()) continue;
    ++answers;
    EXPECT_NE(down.ack().code(), 0);
    EXPECT_LE(down.ack().message().size(), wire::kMaxEchoedBytes);
  }
  writer.join();
  const grpc::Status end = flood->Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << end.error_message();
  EXPECT_TRUE(absl::StrContains(end.error_message(), "--stream_queue_bytes"))
      << end.error_message();
  EXPECT_LT(answers, written.load());

  // Attaching again (as a reconnecting client does), rank 0 gets the directive it missed.
  RawSession again(stub_.get());
  ASSERT_TRUE(again.Attach("bp", 0, joined0.generation(), joined0.session_id()).ok());
  v1::SessionDown pending;
  ASSERT_TRUE(again.ReadNotice(&pending));
  ASSERT_TRUE(pending.has_directive()) << pending.DebugString();
  EXPECT_EQ(pending.directive().step(), 0u);
  EXPECT_EQ(pending.directive().chunk(), 0u);
  EXPECT_TRUE(again.SyncDone(joined0.generation(), 0, 0).ok());
}

TEST_F(BackpressureTest, AWatcherThatNeverReadsIsEndedWithResourceExhausted) {
  grpc::ClientContext watch_context;
  v1::WatchEventsRequest request;
  request.set_job_id("w");
  auto watcher = idle_stub_->WatchEvents(&watch_context, request);
  v1::JoinResponse joined;
  std::unique_ptr<RawSession> rank0 = JoinAndAttach(MakeJoin("w", 2, 0, 1), &joined);
  ASSERT_TRUE(rank0->Stage(joined.generation(), 0, 0, "dense").ok());
  // Duplicates, each an event, until the watcher's queue overflows.
  for (int i = 0; counters().overflows.load() == 0; ++i) {
    ASSERT_LT(i, 1000000) << "the watcher was never ended";
    ASSERT_TRUE(rank0->Stage(joined.generation(), 0, 0, "dense").ok());
  }
  v1::Event event;
  while (watcher->Read(&event)) {
  }
  const grpc::Status end = watcher->Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << end.error_message();
  EXPECT_TRUE(absl::StrContains(end.error_message(), "watch again with replay"))
      << end.error_message();
}

// A node agent's stream that never reads: ended by the overflow deadline like a Session, and its
// ranks detached from the coordinator then (their leases run), not when the agent takes the status.
TEST_F(BackpressureTest, AnAgentThatNeverReadsHasItsRanksDetachedWhenItsStreamIsEnded) {
  v1::JoinResponse joined;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Join(&context, MakeJoin("abp", 1, 0, 1), &joined).ok());
  }
  grpc::ClientContext agent_context;
  auto agent = idle_stub_->AgentSession(&agent_context);
  {
    v1::AgentUp attach;
    attach.set_request_id(1);
    v1::Attach* a = attach.mutable_attach()->mutable_attach();
    a->set_job_id("abp");
    a->set_rank(0);
    a->set_generation(joined.generation());
    a->set_session_id(joined.session_id());
    ASSERT_TRUE(agent->Write(attach));
    v1::AgentDown down;
    while (agent->Read(&down) && down.acks_size() == 0) {
    }
    ASSERT_EQ(down.acks_size(), 1) << down.DebugString();
    ASSERT_EQ(down.acks(0).request_id(), 1u);
    ASSERT_EQ(down.acks(0).code(), 0) << down.acks(0).message();
  }
  ASSERT_EQ(SessionsConnected("abp"), 1u);
  // Attaches of a job nobody joined, again and again: each refused in an AgentAck. Never reading.
  std::thread writer([&] {
    for (uint64_t id = 2;; ++id) {
      v1::AgentUp up;
      up.set_request_id(id);
      up.mutable_attach()->mutable_attach()->set_job_id("no-such-job");
      if (!agent->Write(up)) return;
    }
  });
  ASSERT_TRUE(WaitFor([&] { return counters().overflows.load() >= 1; }));
  EXPECT_TRUE(WaitFor([&] { return SessionsConnected("abp") == 0u; }))
      << "sessions_connected " << SessionsConnected("abp");
  agent_context.TryCancel();
  writer.join();
  agent->Finish();
}

}  // namespace
}  // namespace psync::testing
