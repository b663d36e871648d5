// Coordinator restart with psync::Client: a coordinator that held a job in the middle of a step is
// shut down and a fresh one (no state) takes its place behind the same address. The ranks'
// clients re-join with their Resume, the new coordinator continues in the next generation, and the
// step finishes with every sync released once, executed once per rank, and no violation.
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "client/client.h"
#include "client/testing/tcp_proxy.h"
#include "gtest/gtest.h"
#include "server/test_server.h"

namespace psync {
namespace {

using ::psync::server::TestServer;
using ::psync::testing::TcpProxy;

constexpr uint32_t kRanks = 4;
constexpr char kJob[] = "restart";

// Every rank stages "dense" for chunks 0 and 1; both chunks sync in group "dp" (all ranks).
psync::v1::JoinRequest Plan(uint32_t rank) {
  psync::v1::JoinRequest plan;
  plan.set_job_id(kJob);
  plan.set_world_size(kRanks);
  plan.set_rank(rank);
  plan.set_num_chunks(2);
  for (uint32_t c = 0; c < 2; ++c) {
    psync::v1::ChunkPlan* chunk = plan.add_chunks();
    chunk->set_chunk(c);
    chunk->add_optimizers("dense");
    psync::v1::SyncGroup* group = chunk->add_groups();
    group->set_name("dp");
    for (uint32_t r = 0; r < kRanks; ++r) group->add_ranks(r);
  }
  return plan;
}

std::vector<psync::v1::GroupChecksum> Dp(uint64_t step, uint32_t chunk) {
  psync::v1::GroupChecksum c;
  c.set_group("dp");
  c.set_checksum(step * 100 + chunk);
  return {c};
}

class RestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = TestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    first_ = std::move(*server);
    auto proxy = TcpProxy::Start(first_->target());
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = std::move(*proxy);
    for (uint32_t r = 0; r < kRanks; ++r) {
      ClientOptions options;
      options.target = proxy_->target();
      options.plan = Plan(r);
      options.call_timeout = absl::Seconds(20);
      auto client = Client::Connect(std::move(options));
      ASSERT_TRUE(client.ok()) << client.status();
      clients_.push_back(std::move(*client));
    }
  }

  void Stage(uint32_t rank, uint64_t step, uint32_t chunk) {
    ASSERT_TRUE(clients_[rank]->ReportStaged(step, chunk, "dense").ok())
        << "rank " << rank << " step " << step << " chunk " << chunk;
  }
  void TakeDirective(uint32_t rank, uint64_t step, uint32_t chunk) {
    auto d = clients_[rank]->WaitForDirective(step, chunk, absl::Seconds(20));
    ASSERT_TRUE(d.ok()) << "rank " << rank << " step " << step << " chunk " << chunk << ": "
                        << d.status();
  }
  void Synced(uint32_t rank, uint64_t step, uint32_t chunk) {
    ASSERT_TRUE(clients_[rank]->ReportSyncDone(step, chunk, Dp(step, chunk)).ok())
        << "rank " << rank << " step " << step << " chunk " << chunk;
  }
  void FullStep(uint64_t step) {
    for (uint32_t c = 0; c < 2; ++c) {
      for (uint32_t r = 0; r < kRanks; ++r) Stage(r, step, c);
      for (uint32_t r = 0; r < kRanks; ++r) TakeDirective(r, step, c);
      for (uint32_t r = 0; r < kRanks; ++r) Synced(r, step, c);
    }
  }
  // True once every client re-joined the restarted coordinator (bounded wait on a condition the
  // clients reach by themselves).
  bool AllResumed() {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      bool all = true;
      for (const auto& c : clients_) all = all && c->stats().resumes == 1 && c->connected();
      if (all) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  std::unique_ptr<TestServer> first_;
  std::unique_ptr<TestServer> second_;
  std::unique_ptr<TcpProxy> proxy_;
  std::vector<std::unique_ptr<Client>> clients_;
};

TEST_F(RestartTest, ClientsResumeTheStepOnAFreshCoordinator) {
  FullStep(0);
  // Step 1: chunk 0 released; ranks 0 and 1 synced it and said so; ranks 2 and 3 hold the directive
  // but have not reported. Chunk 1: ranks 0, 1, 2 staged, rank 3 not yet.
  for (uint32_t r = 0; r < kRanks; ++r) Stage(r, 1, 0);
  for (uint32_t r = 0; r < kRanks; ++r) TakeDirective(r, 1, 0);
  Synced(0, 1, 0);
  Synced(1, 1, 0);
  for (uint32_t r = 0; r < 3; ++r) Stage(r, 1, 1);
  for (const auto& c : clients_) ASSERT_EQ(c->generation(), 1u);

  // The coordinator dies; a fresh one takes its address.
  auto second = TestServer::Start();
  ASSERT_TRUE(second.ok()) << second.status();
  second_ = std::move(*second);
  // Every link to the dead coordinator is broken before the proxy points at the new one: a client
  // that reconnected early to the new one and then lost that link too would resume twice (and be
  // handed chunk 0 twice) on a slow host.
  first_->Shutdown();
  proxy_->BreakConnections();
  ASSERT_TRUE(proxy_->SetUpstream(second_->target()).ok());
  ASSERT_TRUE(AllResumed());

  // Ranks 2 and 3 finish chunk 0 (their SyncDone is not early: the release happened before).
  Synced(2, 1, 0);
  Synced(3, 1, 0);
  // Rank 3 stages chunk 1: released to everyone once.
  Stage(3, 1, 1);
  for (uint32_t r = 0; r < kRanks; ++r) TakeDirective(r, 1, 1);
  for (uint32_t r = 0; r < kRanks; ++r) Synced(r, 1, 1);
  FullStep(2);

  // Nobody gets chunk 0 of step 1 a second time (ranks 0 and 1 reported it; ranks 2 and 3 hold it
  // already, and the new coordinator's repeat is dropped).
  for (uint32_t r = 0; r < kRanks; ++r) {
    EXPECT_EQ(clients_[r]->WaitForDirective(1, 0, absl::Milliseconds(50)).status().code(),
              absl::StatusCode::kDeadlineExceeded)
        << "rank " << r;
    EXPECT_EQ(clients_[r]->generation(), 2u) << "the generation after the ranks' one";
    EXPECT_EQ(clients_[r]->stats().resumes, 1u);
  }
  EXPECT_EQ(clients_[2]->stats().duplicate_directives_dropped, 1u);
  EXPECT_EQ(clients_[3]->stats().duplicate_directives_dropped, 1u);

  auto status = second_->coordinator().GetJobStatus(kJob);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->snapshot.generation, 2u);
  EXPECT_EQ(status->counters.violations, 0u);
  EXPECT_EQ(status->counters.rejected, 0u);
  EXPECT_EQ(status->audit.early_syncs, 0u);
  EXPECT_EQ(status->audit.repeated_syncs, 0u);
  EXPECT_EQ(status->audit.double_releases, 0u);
  // Step 1: chunks 0 and 1 (re-)released by the new coordinator; step 2: both chunks.
  EXPECT_EQ(status->counters.releases, 4u);
  EXPECT_EQ(status->snapshot.min_rank_step, 3u);
}

}  // namespace
}  // namespace psync
