// Node agents against a real in-process coordinator: ranks (psync::Client) connected through
// agents get every directive exactly once, the coordinator keeps per-rank state and errors, and
// check-ins that arrive together leave the agent as one merged message.
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/test_server.h"
#include "tests/agent/agent_harness.h"
#include "tests/service/raw_session.h"

namespace psync::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = server::TestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    coordinator_ = v1::Coordinator::NewStub(
        grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  }

  // An agent whose window is an hour: it writes when `flush_messages` are queued, or when a
  // queued check-in completes a chunk on it.
  std::unique_ptr<agent::Agent> StartHoldingAgent(size_t flush_messages) {
    agent::AgentOptions options;
    options.flush_window = absl::Hours(1);
    options.flush_messages = flush_messages;
    return StartAgent(server_->target(), options);
  }

  std::unique_ptr<server::TestServer> server_;
  std::unique_ptr<v1::Coordinator::Stub> coordinator_;
};

TEST_F(AgentTest, EightRanksBehindTwoAgentsGetEveryDirectiveExactlyOnce) {
  constexpr uint32_t kWorld = 8;
  constexpr uint32_t kChunks = 4;
  constexpr uint64_t kSteps = 5;
  const std::vector<uint32_t> expert_chunks = {1, 3};
  // One agent on loopback TCP, one on a unix socket.
  auto tcp_agent = StartAgent(server_->target());
  agent::AgentOptions unix_options;
  const std::string socket = absl::StrCat("/tmp/psync-agent-test-", getpid(), ".sock");
  unix_options.listen = absl::StrCat("unix:", socket);
  auto unix_agent = StartAgent(server_->target(), unix_options);
  ASSERT_NE(tcp_agent, nullptr);
  ASSERT_NE(unix_agent, nullptr);
  EXPECT_EQ(unix_agent->local_target(), absl::StrCat("unix:", socket));
  agent::Agent* agents[2] = {tcp_agent.get(), unix_agent.get()};

  std::vector<v1::JoinRequest> plans;
  std::vector<std::unique_ptr<Client>> ranks;
  for (uint32_t r = 0; r < kWorld; ++r) {
    plans.push_back(MakeJoin("eight", kWorld, r, kChunks, expert_chunks, 2));
    ranks.push_back(ConnectRank(agents[r / 4]->local_target(), plans.back()));
    ASSERT_NE(ranks.back(), nullptr);
  }

  for (uint64_t step = 0; step < kSteps; ++step) {
    OnThreads(kWorld, [&](size_t r) { RunStep(*ranks[r], plans[r], step); });
  }

  // Step kSteps: rank 5 (behind the unix agent) holds back its dense check-in of chunk 0.
  const uint64_t held = kSteps;
  OnThreads(kWorld, [&](size_t r) {
    for (const auto& [chunk, optimizer] : CheckinsOf(plans[r])) {
      if (r == 5 && chunk == 0 && optimizer == "dense") continue;
      ASSERT_TRUE(ranks[r]->ReportStaged(held, chunk, optimizer).ok());
    }
  });
  // Every check-in above was acknowledged, so the coordinator has applied it.
  v1::JobStatus waiting = JobStatus(*coordinator_, "eight");
  EXPECT_EQ(waiting.sessions_connected(), kWorld);
  ASSERT_EQ(waiting.chunks_size(), static_cast<int>(kChunks));
  const v1::ChunkStatus& chunk0 = waiting.chunks(0);
  EXPECT_EQ(chunk0.step(), held);
  EXPECT_EQ(chunk0.state(), "WAITING");
  ASSERT_EQ(chunk0.missing_size(), 1);
  EXPECT_EQ(chunk0.missing(0).rank(), 5u);
  EXPECT_EQ(chunk0.missing(0).optimizer(), "dense");
  std::vector<uint32_t> staged;
  for (const v1::Contributor& c : chunk0.staged()) staged.push_back(c.rank());
  EXPECT_THAT(staged, ElementsAre(0, 1, 2, 3, 4, 6, 7));
  for (uint32_t c = 1; c < kChunks; ++c) EXPECT_EQ(waiting.chunks(c).state(), "RELEASED");

  ASSERT_TRUE(ranks[5]->ReportStaged(held, 0, "dense").ok());
  OnThreads(kWorld, [&](size_t r) { SyncStep(*ranks[r], plans[r], held); });

  // Exactly once, everywhere.
  const uint64_t steps = kSteps + 1;
  for (uint32_t r = 0; r < kWorld; ++r) {
    const ClientStats s = ranks[r]->stats();
    EXPECT_EQ(s.directives_received, steps * kChunks) << "rank " << r;
    EXPECT_EQ(s.duplicate_directives_dropped, 0u) << "rank " << r;
    EXPECT_EQ(s.reconnects, 0u) << "rank " << r;
  }
  const v1::JobStatus done = JobStatus(*coordinator_, "eight");
  EXPECT_EQ(done.counters().releases(), steps * kChunks);
  EXPECT_EQ(done.counters().checkins(), steps * kWorld * (kChunks + expert_chunks.size()));
  EXPECT_EQ(done.counters().syncs_done(), steps * kWorld * kChunks);
  EXPECT_EQ(done.counters().duplicate_checkins(), 0u);
  EXPECT_EQ(done.counters().rejected(), 0u);
  EXPECT_EQ(done.counters().violations(), 0u);
  EXPECT_EQ(done.audit().released(), steps * kChunks);
  EXPECT_EQ(done.audit().complete(), steps * kChunks);
  EXPECT_EQ(done.audit().double_releases(), 0u);
  EXPECT_EQ(done.audit().checksum_mismatches(), 0u);
  EXPECT_EQ(done.min_rank_step(), steps);
  EXPECT_FALSE(done.stragglers().empty());  // per-rank lateness, as with direct Sessions

  for (agent::Agent* a : agents) {
    const agent::AgentStats s = a->stats();
    // Four ranks, per step 6 check-ins and 4 SyncDones each.
    EXPECT_EQ(s.local_messages, 4 * steps * (kChunks + expert_chunks.size() + kChunks));
    EXPECT_EQ(s.local_checkins, 4 * steps * (kChunks + expert_chunks.size()));
    EXPECT_LE(s.upstream_batches, s.local_messages);
    EXPECT_EQ(s.notices_delivered, 4 * steps * kChunks);
    EXPECT_LE(s.notices_received, s.notices_delivered);
    EXPECT_EQ(s.duplicate_directives_dropped, 0u);
    EXPECT_EQ(s.notices_unrouted, 0u);
    EXPECT_EQ(s.local_sessions, 4u);
  }
  unlink(socket.c_str());
}

// Ranks behind an agent finish their run (Client::Finish: Leave with finished): the job ends when
// the last one left, and the coordinator's history says so.
TEST_F(AgentTest, RanksFinishingThroughAnAgentEndTheJob) {
  auto agent = StartAgent(server_->target());
  ASSERT_NE(agent, nullptr);
  std::vector<v1::JoinRequest> plans;
  std::vector<std::unique_ptr<Client>> ranks;
  for (uint32_t r = 0; r < 2; ++r) {
    plans.push_back(MakeJoin("finishing", 2, r, 1));
    ranks.push_back(ConnectRank(agent->local_target(), plans.back()));
    ASSERT_NE(ranks.back(), nullptr);
  }
  OnThreads(2, [&](size_t r) { RunStep(*ranks[r], plans[r], 0); });
  ASSERT_TRUE(ranks[0]->Finish().ok());
  EXPECT_EQ(server_->coordinator().live_jobs(), 1u);
  ASSERT_TRUE(ranks[1]->Finish().ok());
  EXPECT_EQ(server_->coordinator().live_jobs(), 0u);
  absl::StatusOr<server::JobStatusView> view = server_->coordinator().GetJobStatus("finishing");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(server::JobStateText(*view), "ENDED");
  EXPECT_EQ(view->end.reason, "every rank finished");
  EXPECT_EQ(view->counters.releases, 1u);
}

TEST_F(AgentTest, ChecksInTogetherLeaveAsOneMessageAndTheDirectiveComesBackAsOne) {
  // The agent waits for 4 queued messages (the window is never reached), so the 4 ranks'
  // check-ins, sent together, are one upstream message.
  auto node = StartHoldingAgent(4);
  ASSERT_NE(node, nullptr);
  std::vector<v1::JoinRequest> plans;
  std::vector<std::unique_ptr<Client>> ranks;
  for (uint32_t r = 0; r < 4; ++r) {
    plans.push_back(MakeJoin("merged", 4, r, 1));
    ranks.push_back(ConnectRank(node->local_target(), plans.back()));
    ASSERT_NE(ranks.back(), nullptr);
  }
  const agent::AgentStats before = node->stats();
  EXPECT_EQ(before.upstream_batches, 0u);

  OnThreads(4, [&](size_t r) { ASSERT_TRUE(ranks[r]->ReportStaged(0, 0, "dense").ok()); });
  const agent::AgentStats staged = node->stats();
  EXPECT_EQ(staged.local_checkins, 4u);
  EXPECT_EQ(staged.upstream_batches, 1u);
  EXPECT_EQ(staged.merged_checkins, 1u);  // one (step, chunk, optimizer) entry for 4 ranks

  OnThreads(4, [&](size_t r) { SyncStep(*ranks[r], plans[r], 0); });
  const agent::AgentStats synced = node->stats();
  EXPECT_EQ(synced.notices_received, 1u);  // the release, once, for the 4 ranks
  EXPECT_EQ(synced.notices_delivered, 4u);
  EXPECT_EQ(synced.local_messages, 8u);
  EXPECT_EQ(synced.upstream_batches, 2u);   // the 4 SyncDones went together too
  EXPECT_EQ(synced.merged_sync_dones, 1u);  // as one entry: the 4 ranks' checksums are equal

  const v1::JobStatus status = JobStatus(*coordinator_, "merged");
  EXPECT_EQ(status.counters().checkins(), 4u);
  EXPECT_EQ(status.counters().releases(), 1u);
  EXPECT_EQ(status.counters().syncs_done(), 4u);
  EXPECT_EQ(status.audit().complete(), 1u);

  // The coordinator records the merged check-in once, and the 4 SyncDones once: each event names
  // the 4 ranks and no single rank (WatchEvents, as any watcher reads them).
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::WatchEventsRequest watch;
  watch.set_job_id("merged");
  watch.add_kinds("checkin");
  watch.add_kinds("sync_done");
  watch.set_replay(true);
  auto reader = coordinator_->WatchEvents(&context, watch);
  for (const char* kind : {"checkin", "sync_done"}) {
    v1::Event event;
    ASSERT_TRUE(reader->Read(&event)) << kind;
    EXPECT_EQ(event.kind(), kind);
    EXPECT_FALSE(event.has_rank()) << event.ShortDebugString();
    EXPECT_THAT(event.ranks(), UnorderedElementsAre(0u, 1u, 2u, 3u)) << event.ShortDebugString();
  }
  context.TryCancel();
}

// Equal SyncDones share one entry of the agent's batch, yet the coordinator still compares every
// rank's checksum: one rank that gathered other weights is a mismatch, and only one.
TEST_F(AgentTest, ASyncDoneThatDisagreesBehindTheAgentIsStillAChecksumMismatch) {
  auto node = StartHoldingAgent(4);
  ASSERT_NE(node, nullptr);
  std::vector<v1::JoinRequest> plans;
  std::vector<std::unique_ptr<Client>> ranks;
  for (uint32_t r = 0; r < 4; ++r) {
    plans.push_back(MakeJoin("disagree", 4, r, 1));
    ranks.push_back(ConnectRank(node->local_target(), plans.back()));
    ASSERT_NE(ranks.back(), nullptr);
  }
  OnThreads(4, [&](size_t r) { ASSERT_TRUE(ranks[r]->ReportStaged(0, 0, "dense").ok()); });
  OnThreads(4, [&](size_t r) {
    ASSERT_TRUE(ranks[r]->WaitForDirective(0, 0, absl::Seconds(30)).ok());
    std::vector<v1::GroupChecksum> sums = GroupChecksums(plans[r], 0, 0);
    ASSERT_EQ(sums.size(), 1u);
    if (r == 3) sums[0].set_checksum(sums[0].checksum() + 1);
    ASSERT_TRUE(ranks[r]->ReportSyncDone(0, 0, sums).ok());
  });
  const agent::AgentStats s = node->stats();
  EXPECT_EQ(s.upstream_batches, 2u);
  EXPECT_EQ(s.merged_sync_dones, 2u);  // ranks 0-2 in one entry, rank 3 in its own

  const v1::JobStatus status = JobStatus(*coordinator_, "disagree");
  EXPECT_EQ(status.counters().syncs_done(), 4u);
  EXPECT_EQ(status.counters().rejected(), 0u);
  EXPECT_EQ(status.audit().complete(), 1u);
  EXPECT_EQ(status.audit().checksum_mismatches(), 1u);
}

TEST_F(AgentTest, TheCheckInThatCompletesTheNodesChunkLeavesWithoutWaitingForTheWindow) {
  // A window of an hour, and more messages than the test sends before a write: only the
  // completion flush can send them. Chunk 0 is declared by both local ranks, chunk 1 only by
  // rank 0 (rank 1 has no optimizer there).
  auto node = StartHoldingAgent(1024);
  ASSERT_NE(node, nullptr);
  v1::JoinRequest plan0 = MakeJoin("complete", 2, 0, 2);
  v1::JoinRequest plan1 = MakeJoin("complete", 2, 1, 2);
  plan1.mutable_chunks(1)->clear_optimizers();
  auto rank0 = ConnectRank(node->local_target(), plan0);
  auto rank1 = ConnectRank(node->local_target(), plan1);
  ASSERT_NE(rank0, nullptr);
  ASSERT_NE(rank1, nullptr);

  // Rank 0's check-in of chunk 0 completes nothing here: it waits (its call with it).
  absl::Status first;
  std::thread waiting([&] { first = rank0->ReportStaged(0, 0, "dense"); });
  ASSERT_TRUE(WaitUntil([&] { return node->stats().local_checkins == 1; }));
  EXPECT_EQ(node->stats().upstream_batches, 0u);
  // Rank 1's completes chunk 0 on the node: both leave, as one message.
  ASSERT_TRUE(rank1->ReportStaged(0, 0, "dense").ok());
  waiting.join();
  ASSERT_TRUE(first.ok()) << first;
  EXPECT_EQ(node->stats().upstream_batches, 1u);
  EXPECT_EQ(node->stats().merged_checkins, 1u);
  // Chunk 1 has one local contributor: its check-in completes it alone.
  ASSERT_TRUE(rank0->ReportStaged(0, 1, "dense").ok());
  EXPECT_EQ(node->stats().upstream_batches, 2u);

  const v1::JobStatus status = JobStatus(*coordinator_, "complete");
  EXPECT_EQ(status.counters().checkins(), 3u);
  EXPECT_EQ(status.counters().releases(), 2u);
}

TEST_F(AgentTest, MessagesHeldByTheWindowWakeTheWriterOnceNotOncePerMessage) {
  // A window of an hour and room for 1,024 messages: rank 0's check-ins of 4 chunks complete
  // none on the node (rank 1 declared them too), so they wait. Only the first asks the upstream
  // writer to look (its window is the writer's deadline); the others queue behind it without a
  // thread switch each. Rank 1's check-in completes chunk 0 and asks once more: all 5 leave.
  // Counted where the agent asks (the writer itself may look once more than asked, whenever its
  // thread runs: not something a test can wait for).
  auto node = StartHoldingAgent(1024);
  ASSERT_NE(node, nullptr);
  constexpr uint32_t kChunks = 4;
  auto rank0 = ConnectRank(node->local_target(), MakeJoin("wakeups", 2, 0, kChunks));
  auto rank1 = ConnectRank(node->local_target(), MakeJoin("wakeups", 2, 1, kChunks));
  ASSERT_NE(rank0, nullptr);
  ASSERT_NE(rank1, nullptr);
  const agent::AgentStats attached = node->stats();
  EXPECT_EQ(attached.upstream_batches, 0u);

  absl::Mutex mu;
  std::vector<absl::Status> answers;
  auto requests = [&] {
    return node->stats().upstream_wake_requests - attached.upstream_wake_requests;
  };
  for (uint32_t c = 0; c < kChunks; ++c) {
    v1::Staged item;
    item.set_step(0);
    item.set_chunk(c);
    item.set_optimizer("dense");
    rank0->ReportStagedAsync({item}, [&](absl::Status s) {
      absl::MutexLock lock(&mu);
      answers.push_back(s);
    });
    if (c == 0) {
      ASSERT_TRUE(WaitUntil([&] { return requests() == 1; }));
    }
  }
  ASSERT_TRUE(WaitUntil([&] { return node->stats().local_checkins == kChunks; }));
  const agent::AgentStats held = node->stats();
  EXPECT_EQ(held.upstream_batches, 0u);
  EXPECT_EQ(held.upstream_wake_requests - attached.upstream_wake_requests, 1u);

  ASSERT_TRUE(rank1->ReportStaged(0, 0, "dense").ok());
  const agent::AgentStats sent = node->stats();
  // Every held check-in was submitted before rank 1's (local_checkins above), so this is exact.
  EXPECT_EQ(sent.upstream_wake_requests - attached.upstream_wake_requests, 2u);
  EXPECT_EQ(sent.upstream_batches, 1u);
  EXPECT_EQ(sent.merged_checkins, kChunks);  // chunk 0 of both ranks is one entry
  ASSERT_TRUE(WaitUntil([&] {
    absl::MutexLock lock(&mu);
    return answers.size() == kChunks;
  }));
  absl::MutexLock lock(&mu);
  for (const absl::Status& s : answers) EXPECT_TRUE(s.ok()) << s;
  const v1::JobStatus status = JobStatus(*coordinator_, "wakeups");
  EXPECT_EQ(status.counters().checkins(), kChunks + 1);
  EXPECT_EQ(status.counters().releases(), 1u);
}

TEST(AgentLazyAckTest, AnAsynchronousCheckInThroughTheAgentIsAnsweredWithTheRelease) {
  // A coordinator whose lazy acks never flush on their own: a lazy batch is answered only by a
  // later message on the agent's stream. Each local message leaves the agent at once.
  server::ServerOptions server_options;
  server_options.streams.lazy_ack_delay = absl::Hours(1);
  auto server = server::TestServer::Start(std::move(server_options));
  ASSERT_TRUE(server.ok()) << server.status();
  agent::AgentOptions options;
  options.flush_window = absl::Hours(1);
  options.flush_messages = 1;
  auto node = StartAgent((*server)->target(), options);
  ASSERT_NE(node, nullptr);
  v1::JoinRequest plan0 = MakeJoin("lazy-agent", 2, 0, 2);
  v1::JoinRequest plan1 = MakeJoin("lazy-agent", 2, 1, 2);
  auto rank0 = ConnectRank(node->local_target(), plan0);
  auto rank1 = ConnectRank(node->local_target(), plan1);
  ASSERT_NE(rank0, nullptr);
  ASSERT_NE(rank1, nullptr);

  // Rank 0's asynchronous check-in of chunk 0 leaves as a batch of its own, asking for a lazy ack.
  absl::Mutex mu;
  std::optional<absl::Status> answered;
  v1::Staged item;
  item.set_step(0);
  item.set_chunk(0);
  item.set_optimizer("dense");
  rank0->ReportStagedAsync({item}, [&](absl::Status s) {
    absl::MutexLock lock(&mu);
    answered = s;
  });
  // (Both counters: the writer counts a batch, then whether it is lazy.)
  ASSERT_TRUE(WaitUntil([&] {
    const agent::AgentStats s = node->stats();
    return s.upstream_batches == 1 && s.lazy_batches == 1;
  }));
  // Rank 1's blocking check-in of chunk 0 is a batch without lazy_ack. It completes chunk 0, and
  // the message of the release answers both (acked_through, then its AgentAck): nothing else
  // could answer the first within the hour.
  ASSERT_TRUE(rank1->ReportStaged(0, 0, "dense").ok());
  EXPECT_EQ(node->stats().upstream_batches, 2u);
  EXPECT_EQ(node->stats().lazy_batches, 1u);
  ASSERT_TRUE(WaitUntil([&] {
    absl::MutexLock lock(&mu);
    return answered.has_value();
  }));
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(answered->ok()) << *answered;
  }
  EXPECT_TRUE(rank0->WaitForDirective(0, 0, absl::Seconds(10)).ok());
  // Rank 0's check-in was answered by the acked_through of a later message (the directive), not
  // an Ack of its own; rank 1's blocking one got its Ack.
  EXPECT_EQ(node->stats().local_lazy_acks, 1u);
  EXPECT_EQ(node->stats().local_acks, 1u);
}

TEST(AgentLazyAckTest, EveryAsynchronousReportThroughTheAgentIsAnsweredOnceWithoutAnAckOfItsOwn) {
  // Ranks whose every report is asynchronous, through an agent, against a coordinator that answers
  // lazy batches within 5 ms: the agent answers each report by a later message's acked_through,
  // and every callback runs exactly once, with OK.
  server::ServerOptions server_options;
  server_options.streams.lazy_ack_delay = absl::Milliseconds(5);
  auto server = server::TestServer::Start(std::move(server_options));
  ASSERT_TRUE(server.ok()) << server.status();
  auto node = StartAgent((*server)->target());
  ASSERT_NE(node, nullptr);
  constexpr uint32_t kWorld = 2;
  constexpr uint32_t kChunks = 3;
  constexpr uint64_t kSteps = 4;
  std::vector<std::unique_ptr<Client>> ranks;
  for (uint32_t r = 0; r < kWorld; ++r) {
    ranks.push_back(ConnectRank(node->local_target(), MakeJoin("lazy-all", kWorld, r, kChunks)));
    ASSERT_NE(ranks.back(), nullptr);
  }
  absl::Mutex mu;
  std::map<std::string, int> answers;  // report -> callbacks run
  std::vector<absl::Status> errors;
  auto answer = [&](std::string report) {
    return [&, report](absl::Status status) {
      absl::MutexLock lock(&mu);
      ++answers[report];
      if (!status.ok()) errors.push_back(status);
    };
  };
  OnThreads(kWorld, [&](size_t r) {
    Client& rank = *ranks[r];
    for (uint64_t step = 0; step < kSteps; ++step) {
      for (uint32_t chunk = 0; chunk < kChunks; ++chunk) {
        v1::Staged item;
        item.set_step(step);
        item.set_chunk(chunk);
        item.set_optimizer("dense");
        rank.ReportStagedAsync({item}, answer(absl::StrCat(r, " staged ", step, " ", chunk)));
      }
      for (uint32_t chunk = 0; chunk < kChunks; ++chunk) {
        ASSERT_TRUE(rank.WaitForDirective(step, chunk, absl::Seconds(20)).ok());
        rank.ReportSyncDoneAsync(step, chunk, {}, 1,
                                 answer(absl::StrCat(r, " sync_done ", step, " ", chunk)));
      }
    }
  });
  constexpr size_t kReports = 2 * kWorld * kSteps * kChunks;
  ASSERT_TRUE(WaitUntil([&] {
    absl::MutexLock lock(&mu);
    return answers.size() == kReports;
  }));
  absl::MutexLock lock(&mu);
  EXPECT_THAT(errors, ::testing::IsEmpty());
  for (const auto& [report, count] : answers) EXPECT_EQ(count, 1) << report;
  const agent::AgentStats stats = node->stats();
  EXPECT_EQ(stats.local_lazy_acks, kReports);
  EXPECT_EQ(stats.local_acks, 0u);
}

TEST(AgentLazyAckTest, ARefusedAsynchronousReportBetweenAcceptedOnesGetsItsOwnStatus) {
  // Three asynchronous check-ins of one rank, the middle one refused: the refusal is an Ack of
  // its own with the coordinator's status, the others are answered OK by acked_through, each
  // callback once.
  server::ServerOptions server_options;
  server_options.streams.lazy_ack_delay = absl::Milliseconds(5);
  auto server = server::TestServer::Start(std::move(server_options));
  ASSERT_TRUE(server.ok()) << server.status();
  agent::AgentOptions options;
  options.flush_window = absl::Hours(1);
  options.flush_messages = 3;  // the three go up together
  auto node = StartAgent((*server)->target(), options);
  ASSERT_NE(node, nullptr);
  auto rank = ConnectRank(node->local_target(), MakeJoin("lazy-mixed", 2, 0, 3));
  ASSERT_NE(rank, nullptr);
  absl::Mutex mu;
  std::vector<std::pair<int, absl::Status>> answers;
  auto stage = [&](int index, uint32_t chunk, const std::string& optimizer) {
    v1::Staged item;
    item.set_step(0);
    item.set_chunk(chunk);
    item.set_optimizer(optimizer);
    rank->ReportStagedAsync({item}, [&, index](absl::Status status) {
      absl::MutexLock lock(&mu);
      answers.emplace_back(index, status);
    });
  };
  stage(0, 0, "dense");
  stage(1, 1, "bogus");
  stage(2, 2, "dense");
  ASSERT_TRUE(WaitUntil([&] {
    absl::MutexLock lock(&mu);
    return answers.size() == 3;
  }));
  absl::MutexLock lock(&mu);
  std::map<int, absl::Status> by_index(answers.begin(), answers.end());
  ASSERT_EQ(by_index.size(), 3u);
  EXPECT_TRUE(by_index[0].ok()) << by_index[0];
  EXPECT_EQ(by_index[1].code(), absl::StatusCode::kInvalidArgument) << by_index[1];
  EXPECT_TRUE(by_index[2].ok()) << by_index[2];
  EXPECT_EQ(node->stats().local_lazy_acks, 2u);
  EXPECT_EQ(node->stats().local_acks, 1u);
}

TEST_F(AgentTest, OneRanksBadCheckInDoesNotRejectAnothersInTheSameMergedMessage) {
  // What a direct Session answers for the bad check-in.
  auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Coordinator::NewStub(channel);
  grpc::Status direct;
  {
    std::vector<v1::JoinResponse> joined(2);
    for (uint32_t r = 0; r < 2; ++r) {
      grpc::ClientContext context;
      ASSERT_TRUE(stub->Join(&context, MakeJoin("direct", 2, r, 1), &joined[r]).ok());
    }
    RawSession session(stub.get());
    ASSERT_TRUE(session.Attach("direct", 0, joined[0].generation(), joined[0].session_id()).ok());
    direct = session.Stage(joined[0].generation(), 0, 0, "bogus");
    ASSERT_EQ(direct.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }

  auto node = StartHoldingAgent(2);
  ASSERT_NE(node, nullptr);
  auto rank0 = ConnectRank(node->local_target(), MakeJoin("bad", 2, 0, 1));
  auto rank1 = ConnectRank(node->local_target(), MakeJoin("bad", 2, 1, 1));
  ASSERT_NE(rank0, nullptr);
  ASSERT_NE(rank1, nullptr);

  absl::Status bad, good;
  OnThreads(2, [&](size_t r) {
    if (r == 0) bad = rank0->ReportStaged(0, 0, "bogus");
    if (r == 1) good = rank1->ReportStaged(0, 0, "dense");
  });
  EXPECT_EQ(node->stats().upstream_batches, 1u);  // both in one merged message
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), direct.error_message());
  EXPECT_THAT(std::string(bad.message()), HasSubstr("'bogus'"));
  EXPECT_TRUE(good.ok()) << good;

  const v1::JobStatus status = JobStatus(*coordinator_, "bad");
  ASSERT_EQ(status.chunks_size(), 1);
  ASSERT_EQ(status.chunks(0).staged_size(), 1);
  EXPECT_EQ(status.chunks(0).staged(0).rank(), 1u);
  ASSERT_EQ(status.chunks(0).missing_size(), 1);
  EXPECT_EQ(status.chunks(0).missing(0).rank(), 0u);
  EXPECT_EQ(status.counters().checkins(), 1u);
  EXPECT_EQ(status.counters().rejected(), 1u);
}

TEST_F(AgentTest, ACheckInOfARankWhoseJoinTheAgentDidNotSeeIsNotHeldByTheWindow) {
  // The rank joined at the coordinator itself (as after an agent restart, or a rank that joined
  // elsewhere): the agent cannot tell whether a release waits for its check-in, so its hour-long
  // window must not hold it back.
  v1::JoinResponse joined;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(coordinator_->Join(&context, MakeJoin("unseen", 1, 0, 1), &joined).ok());
  }
  auto node = StartHoldingAgent(/*flush_messages=*/1024);
  ASSERT_NE(node, nullptr);
  auto via_agent = v1::Coordinator::NewStub(
      grpc::CreateChannel(node->local_target(), grpc::InsecureChannelCredentials()));
  RawSession session(via_agent.get());
  ASSERT_TRUE(session.Attach("unseen", 0, joined.generation(), joined.session_id()).ok());

  absl::Mutex mu;
  std::optional<grpc::Status> staged;
  std::thread rank([&] {
    grpc::Status status = session.Stage(joined.generation(), joined.next_step(), 0, "dense");
    absl::MutexLock lock(&mu);
    staged = status;
  });
  const bool answered = WaitUntil([&] {
    absl::MutexLock lock(&mu);
    return staged.has_value();
  });
  if (!answered) node.reset();  // ends the local Session, so the thread can finish
  rank.join();
  ASSERT_TRUE(answered) << "the check-in waited for the window";
  EXPECT_TRUE(staged->ok()) << staged->error_message();
  EXPECT_EQ(node->stats().upstream_batches, 1u);
  EXPECT_EQ(JobStatus(*coordinator_, "unseen").counters().releases(), 1u);
}

TEST_F(AgentTest, ForwardsQueriesAndRendezvousAndRefusesWatch) {
  auto node = StartAgent(server_->target());
  ASSERT_NE(node, nullptr);
  v1::JoinRequest join = MakeJoin("queries", 1, 0, 1);
  join.set_node("gpu-node-7");
  auto rank = ConnectRank(node->local_target(), join);
  ASSERT_NE(rank, nullptr);
  auto via_agent = v1::Coordinator::NewStub(
      grpc::CreateChannel(node->local_target(), grpc::InsecureChannelCredentials()));

  EXPECT_EQ(JobStatus(*via_agent, "queries").ranks_joined(), 1u);
  {
    // The rank's node went through the agent's Join; the overview comes back through it too.
    grpc::ClientContext context;
    v1::GetJobOverviewRequest request;
    request.set_job_id("queries");
    v1::JobOverview overview;
    ASSERT_TRUE(via_agent->GetJobOverview(&context, request, &overview).ok());
    ASSERT_EQ(overview.nodes_size(), 1);
    EXPECT_EQ(overview.nodes(0).node(), "gpu-node-7");
  }
  {
    grpc::ClientContext context;
    v1::GetJobOverviewRequest request;
    request.set_job_id("queries");
    request.set_missing_limit(1025);
    v1::JobOverview overview;
    const grpc::Status refused = via_agent->GetJobOverview(&context, request, &overview);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(refused.error_message(), "missing_limit 1025 out of range [0, 1024]");
  }
  {
    grpc::ClientContext context;
    v1::GetJobStatusRequest request;
    request.set_job_id("nobody");
    v1::JobStatus status;
    EXPECT_EQ(via_agent->GetJobStatus(&context, request, &status).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext context;
    v1::KvSetResponse unused;
    ASSERT_TRUE(
        via_agent
            ->KvSet(&context, MakeKvSet("queries", rank->generation(), "nccl", "id-1"), &unused)
            .ok());
  }
  {
    grpc::ClientContext context;
    v1::KvGetResponse values;
    ASSERT_TRUE(
        via_agent->KvGet(&context, MakeKvGet("queries", rank->generation(), "nccl"), &values).ok());
    EXPECT_THAT(values.values(), ElementsAre("id-1"));
  }
  {
    grpc::ClientContext context;
    auto reader = via_agent->WatchEvents(&context, v1::WatchEventsRequest());
    v1::Event event;
    EXPECT_FALSE(reader->Read(&event));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
}

// A rank's Session with its agent follows the coordinator's contract (wire/session_protocol.h):
// a refused first message ends the stream with its status and no Ack, bytes that do not parse end
// it with INVALID_ARGUMENT (first message or later), and each refusal is counted once.
TEST_F(AgentTest, LocalSessionRefusalsEndTheStreamAsOnTheCoordinator) {
  auto node = StartAgent(server_->target());
  ASSERT_NE(node, nullptr);
  auto channel = grpc::CreateChannel(node->local_target(), grpc::InsecureChannelCredentials());
  auto via_agent = v1::Coordinator::NewStub(channel);
  v1::JoinResponse joined;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(via_agent->Join(&context, MakeJoin("local", 1, 0, 1), &joined).ok());
  }
  const std::string garbage(
      "\x12\x05"
      "ab",
      4);  // field 2 declares 5 bytes, carries 2
  auto attach = [&](const std::string& session_id) {
    v1::SessionUp up;
    up.set_request_id(1);
    up.mutable_attach()->set_job_id("local");
    up.mutable_attach()->set_rank(0);
    up.mutable_attach()->set_generation(joined.generation());
    up.mutable_attach()->set_session_id(session_id);
    return up.SerializeAsString();
  };

  // Bytes that do not parse, as the first message: refused by the agent itself.
  RawOutcome first = RunRawSession(channel.get(), {garbage});
  EXPECT_EQ(first.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(first.status.error_message(),
            "attach: the message does not parse as a psync.v1.SessionUp; the Session ends");
  EXPECT_TRUE(first.down.empty());
  EXPECT_EQ(node->stats().local_rejected, 1u);

  // A refused attach: the coordinator's status ends the stream, no Ack; the job counts it. (The
  // stream stays open for writing: a rank that half-closes while its attach is still on its way
  // upstream has its Session ended with OK.)
  RawOutcome refused = RunRawSession(channel.get(), {attach("not-issued")}, /*half_close=*/false);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.status.error_message(), HasSubstr("attach: session_id does not match"));
  EXPECT_TRUE(refused.down.empty());
  EXPECT_EQ(JobStatus(*coordinator_, "local").counters().rejected(), 1u);

  // Attached, then bytes that do not parse: the attach's Ack, then INVALID_ARGUMENT.
  RawOutcome later =
      RunRawSession(channel.get(), {attach(joined.session_id()), garbage}, /*half_close=*/false);
  EXPECT_EQ(later.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(later.status.error_message(),
            "the message does not parse as a psync.v1.SessionUp; the Session ends");
  EXPECT_EQ(node->stats().local_rejected, 2u);
}

}  // namespace
}  // namespace psync::testing
