// A relay tier: node agents whose --target is another psync-agent (the relay), which carries all
// their ranks on one AgentSession stream to a real in-process coordinator. Ranks behind it get
// every directive exactly once and the coordinator keeps per-rank state; the relay refuses what
// the coordinator would refuse on a direct stream (a rank not attached on the stream a message came
// on) and splits each notice by agent; with a window, it merges several agents' batches into one;
// a relay that restarts, or whose own stream to the coordinator breaks, loses and repeats nothing.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/testing/tcp_proxy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/test_server.h"
#include "tests/agent/agent_harness.h"
#include "tests/service/raw_session.h"

namespace psync::testing {
namespace {

using ::testing::ElementsAre;

class RelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = server::TestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    coordinator_ = v1::Coordinator::NewStub(
        grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  }

  // kWorld ranks of `job`, rank r behind node agent r / kRanksPerAgent.
  void ConnectAll(const std::string& job, const std::vector<agent::Agent*>& agents, uint32_t world,
                  uint32_t chunks) {
    for (uint32_t r = 0; r < world; ++r) {
      plans_.push_back(MakeJoin(job, world, r, chunks, /*expert_chunks=*/{1}, 2));
      ranks_.push_back(ConnectRank(agents[r * agents.size() / world]->local_target(), plans_[r]));
      ASSERT_NE(ranks_.back(), nullptr);
    }
  }

  // Ranks 0..world-1 of `job` (one chunk) joined at the coordinator directly; empty (and a test
  // failure) when a join fails.
  std::vector<v1::JoinResponse> JoinDirectly(const std::string& job, uint32_t world) {
    std::vector<v1::JoinResponse> joined(world);
    for (uint32_t r = 0; r < world; ++r) {
      grpc::ClientContext context;
      const grpc::Status s = coordinator_->Join(&context, MakeJoin(job, world, r, 1), &joined[r]);
      if (!s.ok()) {
        ADD_FAILURE() << "join of rank " << r << ": " << s.error_message();
        return {};
      }
    }
    return joined;
  }

  // Every rank got every directive of `steps` steps of `chunks` once, and the coordinator's audit
  // agrees.
  void ExpectExactlyOnce(const std::string& job, uint64_t steps, uint32_t chunks) {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const ClientStats s = ranks_[r]->stats();
      EXPECT_EQ(s.directives_received, steps * chunks) << "rank " << r;
      EXPECT_EQ(s.duplicate_directives_dropped, 0u) << "rank " << r;
      EXPECT_EQ(s.reconnects, 0u) << "rank " << r << " saw nothing of the relay";
    }
    const v1::JobStatus status = JobStatus(*coordinator_, job);
    EXPECT_EQ(status.counters().releases(), steps * chunks);
    EXPECT_EQ(status.counters().syncs_done(), steps * chunks * ranks_.size());
    EXPECT_EQ(status.counters().duplicate_checkins(), 0u);
    EXPECT_EQ(status.counters().rejected(), 0u);
    EXPECT_EQ(status.counters().violations(), 0u);
    EXPECT_EQ(status.audit().complete(), steps * chunks);
    EXPECT_EQ(status.audit().double_releases(), 0u);
    EXPECT_EQ(status.audit().repeated_syncs(), 0u);
    EXPECT_EQ(status.sessions_connected(), ranks_.size());
  }

  void RunTwoAgentsBehindARelay(int fanout_threads);

  std::unique_ptr<server::TestServer> server_;
  std::unique_ptr<v1::Coordinator::Stub> coordinator_;
  std::vector<v1::JoinRequest> plans_;
  std::vector<std::unique_ptr<Client>> ranks_;
};

// Ranks behind two agents behind a relay whose shares go down on `fanout_threads` threads.
void RelayTest::RunTwoAgentsBehindARelay(int fanout_threads) {
  constexpr uint32_t kWorld = 8;
  constexpr uint32_t kChunks = 3;
  constexpr uint64_t kSteps = 4;
  agent::AgentOptions relay_options;
  relay_options.relay_fanout_threads = fanout_threads;
  auto relay = StartAgent(server_->target(), relay_options);
  ASSERT_NE(relay, nullptr);
  auto node_a = StartAgent(relay->local_target());
  auto node_b = StartAgent(relay->local_target());
  ASSERT_NE(node_a, nullptr);
  ASSERT_NE(node_b, nullptr);
  ConnectAll("relayed", {node_a.get(), node_b.get()}, kWorld, kChunks);

  for (uint64_t step = 0; step < kSteps; ++step) {
    OnThreads(kWorld, [&](size_t r) { RunStep(*ranks_[r], plans_[r], step); });
  }
  // Step kSteps: rank 6 (behind node b) holds back its dense check-in of chunk 0; the coordinator
  // names it as the one missing.
  OnThreads(kWorld, [&](size_t r) {
    for (const auto& [chunk, optimizer] : CheckinsOf(plans_[r])) {
      if (r == 6 && chunk == 0 && optimizer == "dense") continue;
      ASSERT_TRUE(ranks_[r]->ReportStaged(kSteps, chunk, optimizer).ok());
    }
  });
  const v1::JobStatus waiting = JobStatus(*coordinator_, "relayed");
  ASSERT_EQ(waiting.chunks_size(), static_cast<int>(kChunks));
  EXPECT_EQ(waiting.chunks(0).state(), "WAITING");
  ASSERT_EQ(waiting.chunks(0).missing_size(), 1);
  EXPECT_EQ(waiting.chunks(0).missing(0).rank(), 6u);
  EXPECT_EQ(waiting.chunks(0).missing(0).optimizer(), "dense");
  ASSERT_TRUE(ranks_[6]->ReportStaged(kSteps, 0, "dense").ok());
  OnThreads(kWorld, [&](size_t r) { SyncStep(*ranks_[r], plans_[r], kSteps); });
  ExpectExactlyOnce("relayed", kSteps + 1, kChunks);

  const agent::AgentStats s = relay->stats();
  EXPECT_EQ(s.relayed_agents, 2u);
  EXPECT_EQ(s.relayed_attaches, kWorld);
  EXPECT_EQ(s.relay_refused, 0u);
  EXPECT_EQ(s.local_sessions, 0u) << "no rank is the relay's own";
  // Every notice the coordinator sent the relay reached ranks of both agents.
  EXPECT_GT(s.notices_received, 0u);
  EXPECT_EQ(s.notices_unrouted, 0u);
  EXPECT_EQ(s.relay_notices, 2 * s.notices_received);
  // What the node agents sent, the relay carried.
  EXPECT_EQ(s.relayed_batches, node_a->stats().upstream_batches + node_b->stats().upstream_batches);
}

TEST_F(RelayTest, RanksBehindTwoAgentsBehindARelayGetEveryDirectiveExactlyOnce) {
  RunTwoAgentsBehindARelay(/*fanout_threads=*/0);
}

TEST_F(RelayTest, RanksBehindARelayWritingOnThreeFanoutThreadsGetEveryDirectiveExactlyOnce) {
  RunTwoAgentsBehindARelay(/*fanout_threads=*/3);
}

// One raw AgentSession to the relay, as a node agent speaks it.
class RawAgentStream {
 public:
  explicit RawAgentStream(const std::string& target)
      : stub_(v1::Coordinator::NewStub(
            grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    stream_ = stub_->AgentSession(&context_);
  }
  void Attach(uint64_t request_id, const std::string& job, uint32_t rank,
              const v1::JoinResponse& joined) {
    v1::AgentUp up;
    up.set_request_id(request_id);
    v1::Attach* a = up.mutable_attach()->mutable_attach();
    a->set_job_id(job);
    a->set_rank(rank);
    a->set_generation(joined.generation());
    a->set_session_id(joined.session_id());
    ASSERT_TRUE(stream_->Write(up));
  }
  // Batch `request_id`: each of `ranks` checks in "dense" for `chunk` of step 0.
  void Stage(uint64_t request_id, const std::string& job, uint64_t generation, uint32_t chunk,
             const std::vector<uint32_t>& ranks) {
    v1::AgentUp up;
    up.set_request_id(request_id);
    v1::AgentBatch* batch = up.mutable_batch();
    batch->set_job_id(job);
    batch->set_generation(generation);
    v1::MergedStaged* staged = batch->add_staged();
    staged->set_chunk(chunk);
    staged->set_optimizer("dense");
    for (uint32_t i = 0; i < ranks.size(); ++i) {
      batch->add_ranks(ranks[i]);
      staged->add_messages(i);
    }
    ASSERT_TRUE(stream_->Write(up));
  }
  // Reads until the ack of `request_id` came (the notices read on the way are kept).
  v1::AgentAck AckOf(uint64_t request_id) {
    v1::AgentDown down;
    while (stream_->Read(&down)) {
      for (const v1::AgentNotice& n : down.notices()) notices_.push_back(n);
      for (const v1::AgentAck& ack : down.acks()) {
        if (ack.request_id() == request_id) return ack;
      }
    }
    ADD_FAILURE() << "the stream ended before the ack of " << request_id;
    return v1::AgentAck();
  }
  // Reads until `count` notice entries came in all.
  const std::vector<v1::AgentNotice>& Notices(size_t count) {
    v1::AgentDown down;
    while (notices_.size() < count && stream_->Read(&down)) {
      for (const v1::AgentNotice& n : down.notices()) notices_.push_back(n);
    }
    return notices_;
  }

 private:
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentUp, v1::AgentDown>> stream_;
  std::vector<v1::AgentNotice> notices_;
};

TEST_F(RelayTest, ARelayRefusesAMessageOfARankAttachedThroughAnotherStreamAndSplitsNotices) {
  const std::string job = "relay-refuse";
  const std::vector<v1::JoinResponse> joined = JoinDirectly(job, 2);
  ASSERT_EQ(joined.size(), 2u);
  auto relay = StartAgent(server_->target());
  ASSERT_NE(relay, nullptr);
  RawAgentStream a(relay->local_target());
  RawAgentStream b(relay->local_target());
  a.Attach(7, job, 0, joined[0]);
  EXPECT_EQ(a.AckOf(7).code(), 0);
  b.Attach(9, job, 1, joined[1]);
  EXPECT_EQ(b.AckOf(9).code(), 0);

  // Rank 1 is attached on the relay's stream to the coordinator, but not through stream a: its
  // message is refused as the coordinator refuses it on a direct stream, rank 0's goes up.
  a.Stage(8, job, joined[0].generation(), 0, {0, 1});
  const v1::AgentAck mixed = a.AckOf(8);
  EXPECT_EQ(mixed.code(), 0);
  ASSERT_EQ(mixed.rejected_size(), 1);
  EXPECT_EQ(mixed.rejected(0).index(), 1u);
  EXPECT_EQ(mixed.rejected(0).code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(mixed.rejected(0).message(),
            "rank 1 of job 'relay-refuse' is not attached on this agent session");
  // A batch of none of its own ranks is answered by the relay itself, every message refused.
  a.Stage(10, job, joined[0].generation(), 0, {1, 1});
  const v1::AgentAck none = a.AckOf(10);
  ASSERT_EQ(none.rejected_size(), 2);
  EXPECT_EQ(none.rejected(0).index(), 0u);
  EXPECT_EQ(none.rejected(1).index(), 1u);

  v1::JobStatus status = JobStatus(*coordinator_, job);
  ASSERT_EQ(status.chunks_size(), 1);
  EXPECT_EQ(status.chunks(0).state(), "WAITING");
  ASSERT_EQ(status.chunks(0).missing_size(), 1);
  EXPECT_EQ(status.chunks(0).missing(0).rank(), 1u);
  EXPECT_EQ(status.counters().checkins(), 1u);

  // Rank 1's own stream completes the chunk: one release, each stream gets its own rank's share.
  b.Stage(11, job, joined[1].generation(), 0, {1});
  EXPECT_EQ(b.AckOf(11).rejected_size(), 0);
  const std::vector<v1::AgentNotice>& to_a = a.Notices(1);
  const std::vector<v1::AgentNotice>& to_b = b.Notices(1);
  ASSERT_EQ(to_a.size(), 1u);
  ASSERT_EQ(to_b.size(), 1u);
  EXPECT_THAT(to_a[0].ranks(), ElementsAre(0u));
  EXPECT_THAT(to_b[0].ranks(), ElementsAre(1u));
  EXPECT_TRUE(to_a[0].notice().has_directive());
  EXPECT_EQ(to_a[0].notice().directive().chunk(), 0u);
  status = JobStatus(*coordinator_, job);
  EXPECT_EQ(status.counters().releases(), 1u);
  EXPECT_EQ(status.counters().checkins(), 2u);
  EXPECT_EQ(relay->stats().relay_refused, 3u);
}

// With --relay_flush_window, batches of several agents wait for one another and go up as one
// AgentBatch; an attach queued behind them sends them at once, in order before it. (A window of
// an hour: nothing here waits for it to pass.)
TEST_F(RelayTest, ARelayWindowMergesTheBatchesOfSeveralAgentsUntilAnAttachSendsThem) {
  const std::string job = "relay-window";
  const std::vector<v1::JoinResponse> joined = JoinDirectly(job, 3);
  ASSERT_EQ(joined.size(), 3u);
  agent::AgentOptions options;
  options.relay_flush_window = absl::Hours(1);
  auto relay = StartAgent(server_->target(), options);
  ASSERT_NE(relay, nullptr);
  RawAgentStream a(relay->local_target());
  RawAgentStream b(relay->local_target());
  RawAgentStream c(relay->local_target());
  a.Attach(1, job, 0, joined[0]);
  EXPECT_EQ(a.AckOf(1).code(), 0);
  b.Attach(2, job, 1, joined[1]);
  EXPECT_EQ(b.AckOf(2).code(), 0);
  // Counted where the relay asks its writer to look (the writer itself may look once more than
  // asked, whenever its thread runs: not something a test can wait for).
  const uint64_t requests = relay->stats().upstream_wake_requests;

  a.Stage(3, job, joined[0].generation(), 0, {0});
  ASSERT_TRUE(WaitUntil([&] { return relay->stats().upstream_wake_requests - requests == 1; }));
  b.Stage(4, job, joined[1].generation(), 0, {1});
  ASSERT_TRUE(WaitUntil([&] { return relay->stats().relayed_batches == 2; }));
  EXPECT_EQ(relay->stats().upstream_batches, 0u) << "held by the window";
  EXPECT_EQ(JobStatus(*coordinator_, job).counters().checkins(), 0u);

  c.Attach(5, job, 2, joined[2]);
  EXPECT_EQ(c.AckOf(5).code(), 0);
  EXPECT_EQ(a.AckOf(3).rejected_size(), 0);
  EXPECT_EQ(b.AckOf(4).rejected_size(), 0);
  const agent::AgentStats s = relay->stats();
  EXPECT_EQ(s.upstream_batches, 1u);
  EXPECT_EQ(s.relay_merged_batches, 1u);
  EXPECT_EQ(JobStatus(*coordinator_, job).counters().checkins(), 2u);
  // The writer was asked to look for the first held batch (to learn the window's end) and for the
  // attach that ended the window, not for the second batch held behind the first (its Receive was
  // done before the attach's began).
  EXPECT_EQ(s.upstream_wake_requests - requests, 2u);
}

TEST_F(RelayTest, ARelayThatRestartsLosesAndRepeatsNothing) {
  constexpr uint32_t kWorld = 4;
  constexpr uint32_t kChunks = 2;
  auto relay = StartAgent(server_->target());
  ASSERT_NE(relay, nullptr);
  // The node agent reaches the relay through a proxy, which is pointed at the new relay later.
  auto proxy = TcpProxy::Start(relay->local_target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  auto node = StartAgent((*proxy)->target());
  ASSERT_NE(node, nullptr);
  ConnectAll("relay-restart", {node.get()}, kWorld, kChunks);
  OnThreads(kWorld, [&](size_t r) { RunStep(*ranks_[r], plans_[r], 0); });

  // Step 1: three ranks check in, then the relay is gone (the coordinator detaches every rank it
  // carried); the last rank's check-ins wait in the node agent for the new relay.
  OnThreads(kWorld - 1, [&](size_t r) {
    for (const auto& [chunk, optimizer] : CheckinsOf(plans_[r])) {
      ASSERT_TRUE(ranks_[r]->ReportStaged(1, chunk, optimizer).ok());
    }
  });
  relay->Shutdown();
  relay.reset();
  // Links to the old relay are broken before the proxy points at the new one, so that the node
  // attaches there once (a link made to the new relay is never broken).
  (*proxy)->BreakConnections();
  auto restarted = StartAgent(server_->target());
  ASSERT_NE(restarted, nullptr);
  ASSERT_TRUE((*proxy)->SetUpstream(restarted->local_target()).ok());
  for (const auto& [chunk, optimizer] : CheckinsOf(plans_[kWorld - 1])) {
    ASSERT_TRUE(ranks_[kWorld - 1]->ReportStaged(1, chunk, optimizer).ok());
  }
  OnThreads(kWorld, [&](size_t r) { SyncStep(*ranks_[r], plans_[r], 1); });
  OnThreads(kWorld, [&](size_t r) { RunStep(*ranks_[r], plans_[r], 2); });

  ExpectExactlyOnce("relay-restart", 3, kChunks);
  EXPECT_GE(node->stats().reconnects, 1u);
  EXPECT_EQ(restarted->stats().relayed_attaches, kWorld) << "re-attached through the new relay";
}

TEST_F(RelayTest, TheRelaysOwnStreamBreakingIsInvisibleToItsAgentsAndRanks) {
  constexpr uint32_t kWorld = 4;
  constexpr uint32_t kChunks = 2;
  auto proxy = TcpProxy::Start(server_->target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  auto relay = StartAgent((*proxy)->target());
  ASSERT_NE(relay, nullptr);
  auto node_a = StartAgent(relay->local_target());
  auto node_b = StartAgent(relay->local_target());
  ASSERT_NE(node_a, nullptr);
  ASSERT_NE(node_b, nullptr);
  ConnectAll("relay-break", {node_a.get(), node_b.get()}, kWorld, kChunks);
  OnThreads(kWorld, [&](size_t r) { RunStep(*ranks_[r], plans_[r], 0); });

  // Step 1: the relay's connection breaks between the check-ins; the last rank's check-ins go up
  // after the relay re-attached every rank and re-sent what was not answered.
  OnThreads(kWorld - 1, [&](size_t r) {
    for (const auto& [chunk, optimizer] : CheckinsOf(plans_[r])) {
      ASSERT_TRUE(ranks_[r]->ReportStaged(1, chunk, optimizer).ok());
    }
  });
  (*proxy)->BreakConnections();
  for (const auto& [chunk, optimizer] : CheckinsOf(plans_[kWorld - 1])) {
    ASSERT_TRUE(ranks_[kWorld - 1]->ReportStaged(1, chunk, optimizer).ok());
  }
  OnThreads(kWorld, [&](size_t r) { SyncStep(*ranks_[r], plans_[r], 1); });
  OnThreads(kWorld, [&](size_t r) { RunStep(*ranks_[r], plans_[r], 2); });

  ExpectExactlyOnce("relay-break", 3, kChunks);
  EXPECT_GE(relay->stats().reconnects, 1u);
  EXPECT_EQ(node_a->stats().reconnects, 0u);
  EXPECT_EQ(node_b->stats().reconnects, 0u);
}

}  // namespace
}  // namespace psync::testing
