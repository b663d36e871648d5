// Node agents when things fail: the agent's stream to the coordinator breaks (the agent
// reconnects, re-attaches, re-sends; no directive is lost or repeated), a rank's Session with the
// agent ends (the coordinator sees the rank go), the agent itself goes away (every rank it carried
// is detached).
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/testing/tcp_proxy.h"
#include "gtest/gtest.h"
#include "serve/clock.h"
#include "server/test_server.h"
#include "tests/agent/agent_harness.h"
#include "tests/service/raw_session.h"

namespace psync::testing {
namespace {

class AgentFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::CoordinatorOptions options;
    options.rank_lease = absl::Seconds(10);
    options.lost_rank_abort_after = absl::Seconds(30);
    auto server = server::TestServer::Start(options, &clock_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    coordinator_ = v1::Coordinator::NewStub(
        grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  }

  // Connects `world` ranks (1 chunk per rank, dense only, `chunks` chunks) through `node`.
  void ConnectAll(agent::Agent& node, const std::string& job, uint32_t world, uint32_t chunks) {
    for (uint32_t r = 0; r < world; ++r) {
      plans_.push_back(MakeJoin(job, world, r, chunks));
      ranks_.push_back(ConnectRank(node.local_target(), plans_.back()));
      ASSERT_NE(ranks_.back(), nullptr);
    }
  }

  uint32_t Connected(const std::string& job) {
    return JobStatus(*coordinator_, job).sessions_connected();
  }

  serve::FakeClock clock_;
  std::unique_ptr<server::TestServer> server_;
  std::unique_ptr<v1::Coordinator::Stub> coordinator_;
  std::vector<v1::JoinRequest> plans_;
  std::vector<std::unique_ptr<Client>> ranks_;
};

TEST_F(AgentFailureTest, UpstreamBreakAndReconnectLoseAndRepeatNothing) {
  constexpr uint32_t kWorld = 4;
  constexpr uint32_t kChunks = 2;
  auto proxy = TcpProxy::Start(server_->target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  auto node = StartAgent((*proxy)->target());
  ASSERT_NE(node, nullptr);
  ConnectAll(*node, "break", kWorld, kChunks);

  OnThreads(kWorld, [&](size_t r) { RunStep(*ranks_[r], plans_[r], 0); });

  // Step 1: every directive arrives, chunk 0 is synced, then the coordinator is unreachable while
  // the ranks report SyncDone for chunk 1. The agent re-attaches its ranks first (the coordinator
  // re-sends chunk 1's directive, which every rank already has), then re-sends the SyncDones.
  OnThreads(kWorld, [&](size_t r) {
    for (uint32_t c = 0; c < kChunks; ++c) ASSERT_TRUE(ranks_[r]->ReportStaged(1, c, "dense").ok());
    for (uint32_t c = 0; c < kChunks; ++c) {
      ASSERT_TRUE(ranks_[r]->WaitForDirective(1, c, absl::Seconds(30)).ok());
    }
    ASSERT_TRUE(ranks_[r]->ReportSyncDone(1, 0, GroupChecksums(plans_[r], 1, 0)).ok());
  });
  (*proxy)->SetRefusing(true);
  (*proxy)->BreakConnections();
  std::vector<absl::Status> sync_done(kWorld);
  std::thread reporters([&] {
    OnThreads(kWorld, [&](size_t r) {
      sync_done[r] = ranks_[r]->ReportSyncDone(1, 1, GroupChecksums(plans_[r], 1, 1));
    });
  });
  (*proxy)->SetRefusing(false);
  reporters.join();
  for (uint32_t r = 0; r < kWorld; ++r) EXPECT_TRUE(sync_done[r].ok()) << r << ": " << sync_done[r];
  // The re-sent directives come with (or before) the SyncDones' acks, handed out just after them.
  EXPECT_TRUE(WaitUntil([&] { return node->stats().duplicate_directives_dropped >= kWorld; }))
      << node->stats().duplicate_directives_dropped;

  // Step 2: the connection breaks between the check-ins (the last rank's waits for the agent to
  // reconnect); step 3 runs normally.
  OnThreads(kWorld - 1, [&](size_t r) {
    for (uint32_t c = 0; c < kChunks; ++c) ASSERT_TRUE(ranks_[r]->ReportStaged(2, c, "dense").ok());
  });
  (*proxy)->BreakConnections();
  for (uint32_t c = 0; c < kChunks; ++c) {
    ASSERT_TRUE(ranks_[kWorld - 1]->ReportStaged(2, c, "dense").ok());
  }
  OnThreads(kWorld, [&](size_t r) { SyncStep(*ranks_[r], plans_[r], 2); });
  OnThreads(kWorld, [&](size_t r) { RunStep(*ranks_[r], plans_[r], 3); });

  constexpr uint64_t kSteps = 4;
  for (uint32_t r = 0; r < kWorld; ++r) {
    const ClientStats s = ranks_[r]->stats();
    EXPECT_EQ(s.directives_received, kSteps * kChunks) << "rank " << r;
    EXPECT_EQ(s.duplicate_directives_dropped, 0u) << "rank " << r;
    EXPECT_EQ(s.reconnects, 0u) << "rank " << r << " never saw the break";
  }
  EXPECT_GE(node->stats().reconnects, 2u);
  const v1::JobStatus status = JobStatus(*coordinator_, "break");
  EXPECT_EQ(status.counters().releases(), kSteps * kChunks);
  EXPECT_EQ(status.counters().checkins(), kSteps * kChunks * kWorld);
  EXPECT_EQ(status.counters().syncs_done(), kSteps * kChunks * kWorld);
  EXPECT_EQ(status.counters().violations(), 0u);
  EXPECT_EQ(status.audit().complete(), kSteps * kChunks);
  EXPECT_EQ(status.audit().double_releases(), 0u);
  EXPECT_EQ(status.audit().repeated_syncs(), 0u);
  EXPECT_EQ(status.sessions_connected(), kWorld);
}

TEST_F(AgentFailureTest, StepSkippedSentWhileTheAgentWasAwayIsResentOnReattach) {
  auto proxy = TcpProxy::Start(server_->target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  auto node = StartAgent((*proxy)->target());
  ASSERT_NE(node, nullptr);
  // Rank 0 behind the agent, rank 1 direct.
  plans_.push_back(MakeJoin("skip", 2, 0, 1));
  auto rank0 = ConnectRank(node->local_target(), plans_[0]);
  auto rank1 = ConnectRank(server_->target(), MakeJoin("skip", 2, 1, 1));
  ASSERT_NE(rank0, nullptr);
  ASSERT_NE(rank1, nullptr);

  ASSERT_TRUE(rank0->SkipStep(0, "found_inf").ok());
  (*proxy)->SetRefusing(true);
  (*proxy)->BreakConnections();
  // Rank 0 is detached while the agent is away, so the StepSkipped of rank 1's vote is lost.
  ASSERT_TRUE(WaitUntil([&] { return Connected("skip") == 1; }));
  ASSERT_TRUE(rank1->SkipStep(0, "found_inf").ok());
  ASSERT_TRUE(rank1->WaitForStepSkipped(0, absl::Seconds(30)).ok());
  (*proxy)->SetRefusing(false);

  // The agent re-attaches rank 0, and the coordinator sends it the StepSkipped again.
  EXPECT_TRUE(rank0->WaitForStepSkipped(0, absl::Seconds(30)).ok());
  ASSERT_TRUE(rank0->ReportStaged(1, 0, "dense").ok());
  ASSERT_TRUE(rank1->ReportStaged(1, 0, "dense").ok());
  EXPECT_TRUE(rank0->WaitForDirective(1, 0, absl::Seconds(30)).ok());
  EXPECT_EQ(JobStatus(*coordinator_, "skip").counters().skipped_steps(), 1u);
}

TEST_F(AgentFailureTest, EndedLocalSessionAndEndedAgentDetachTheirRanks) {
  auto node = StartAgent(server_->target());
  ASSERT_NE(node, nullptr);
  ConnectAll(*node, "gone", 4, 1);
  ASSERT_EQ(JobStatus(*coordinator_, "gone").sessions_connected(), 4u);

  // Rank 2's Session with the agent ends: the coordinator detaches rank 2 (and only rank 2).
  ranks_[2]->Close();
  ASSERT_TRUE(WaitUntil([&] { return Connected("gone") == 3; }));
  clock_.Advance(absl::Seconds(11));
  server_->coordinator().EnforceLiveness();
  v1::JobStatus status = JobStatus(*coordinator_, "gone");
  EXPECT_EQ(status.state(), "DEGRADED");
  ASSERT_EQ(status.lost_ranks_size(), 1);
  EXPECT_EQ(status.lost_ranks(0), 2u);

  // The agent goes away: every rank it carried is detached.
  node->Shutdown();
  ASSERT_TRUE(WaitUntil([&] { return Connected("gone") == 0; }));
  clock_.Advance(absl::Seconds(11));
  server_->coordinator().EnforceLiveness();
  status = JobStatus(*coordinator_, "gone");
  EXPECT_EQ(status.lost_ranks_size(), 4);
}

TEST_F(AgentFailureTest, ANewerSessionOfTheRankSupersedesTheOneThroughTheAgent) {
  auto node = StartAgent(server_->target());
  ASSERT_NE(node, nullptr);
  ConnectAll(*node, "moved", 2, 1);

  // Rank 1 attaches directly to the coordinator (same incarnation: a reconnect).
  auto direct = ConnectRank(server_->target(), plans_[1]);
  ASSERT_NE(direct, nullptr);
  // Its Session through the agent was superseded: that client fails with ABORTED, as it would
  // on the coordinator.
  absl::Status superseded;
  ASSERT_TRUE(WaitUntil([&] {
    superseded = ranks_[1]->ReportStaged(0, 0, "dense");
    return superseded.code() == absl::StatusCode::kAborted;
  })) << superseded;
  EXPECT_EQ(JobStatus(*coordinator_, "moved").sessions_connected(), 2u);

  // The job goes on with rank 0 behind the agent and rank 1 direct.
  ASSERT_TRUE(ranks_[0]->ReportStaged(0, 0, "dense").ok());
  ASSERT_TRUE(direct->ReportStaged(0, 0, "dense").ok());
  ASSERT_TRUE(ranks_[0]->WaitForDirective(0, 0, absl::Seconds(30)).ok());
  ASSERT_TRUE(direct->WaitForDirective(0, 0, absl::Seconds(30)).ok());
  EXPECT_EQ(node->stats().local_sessions, 1u);
}

}  // namespace
}  // namespace psync::testing
