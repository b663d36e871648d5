// Tests of the worker's asynchronous link (worker/coordination.h) over a real psync::Client
// and an in-process coordinator.
#include <memory>
#include <string>
#include <vector>

#include "client/client.h"
#include "gtest/gtest.h"
#include "server/test_server.h"
#include "worker/coordination.h"

namespace psync {
namespace worker {
namespace {

// One rank, `chunks` chunks, a dense and an expert optimizer each, all synced in group "dp".
psync::v1::JoinRequest Plan(const std::string& job, uint32_t chunks) {
  psync::v1::JoinRequest plan;
  plan.set_job_id(job);
  plan.set_world_size(1);
  plan.set_rank(0);
  plan.set_num_chunks(chunks);
  for (uint32_t c = 0; c < chunks; ++c) {
    psync::v1::ChunkPlan* chunk = plan.add_chunks();
    chunk->set_chunk(c);
    chunk->add_optimizers("dense");
    chunk->add_optimizers("expert");
    psync::v1::SyncGroup* group = chunk->add_groups();
    group->set_name("dp");
    group->add_ranks(0);
  }
  return plan;
}

std::vector<psync::v1::GroupChecksum> Dp(uint64_t value) {
  psync::v1::GroupChecksum c;
  c.set_group("dp");
  c.set_checksum(value);
  return {c};
}

class AsyncCoordinationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = server::TestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  std::unique_ptr<Client> Connect(const std::string& job, uint32_t chunks) {
    ClientOptions options;
    options.target = server_->target();
    options.plan = Plan(job, chunks);
    options.call_timeout = absl::Seconds(10);
    auto client = Client::Connect(std::move(options));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }
  std::unique_ptr<server::TestServer> server_;
};

TEST_F(AsyncCoordinationTest, ReportsFlowInOrderWithoutWaitingForAcks) {
  auto client = Connect("async-link", 2);
  ASSERT_NE(client, nullptr);
  auto link = NewAsyncClientCoordination(client.get(), absl::Seconds(10));
  // A whole step, then the next step's check-ins, without waiting for any Ack in between: the
  // coordinator sees them in order (a check-in of step 1 before the SyncDones of step 0 would be
  // refused with FAILED_PRECONDITION).
  for (uint32_t chunk = 0; chunk < 2; ++chunk) {
    ASSERT_TRUE(link->ReportStaged(0, chunk, "dense").ok());
    ASSERT_TRUE(link->ReportStaged(0, chunk, "expert").ok());
  }
  for (uint32_t chunk = 0; chunk < 2; ++chunk) {
    absl::StatusOr<psync::v1::SyncDirective> d =
        link->WaitForDirective(0, chunk, absl::Seconds(10));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->chunk(), chunk);
    ASSERT_TRUE(link->ReportSyncDone(0, chunk, Dp(10 + chunk), 1).ok());
  }
  ASSERT_TRUE(link->ReportStagedBatch({[] {
                    psync::v1::Staged s;
                    s.set_step(1);
                    s.set_chunk(0);
                    s.set_optimizer("dense");
                    return s;
                  }()})
                  .ok());
  EXPECT_TRUE(link->Flush().ok());
  auto status = server_->coordinator().GetJobStatus("async-link");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->counters.violations, 0u);
  EXPECT_EQ(status->counters.checkins, 5u);
  EXPECT_EQ(status->counters.releases, 2u);
  EXPECT_EQ(status->counters.syncs_done, 2u);
}

TEST_F(AsyncCoordinationTest, TheFirstRefusalIsReturnedFromThenOn) {
  auto client = Connect("async-refusal", 2);
  ASSERT_NE(client, nullptr);
  auto link = NewAsyncClientCoordination(client.get(), absl::Seconds(10));
  ASSERT_TRUE(link->ReportStaged(0, 0, "dense").ok());
  // SyncDone before its directive: the coordinator refuses it.
  ASSERT_TRUE(link->ReportSyncDone(0, 1, Dp(1), 1).ok());
  const absl::Status flushed = link->Flush();
  EXPECT_EQ(flushed.code(), absl::StatusCode::kFailedPrecondition) << flushed;
  EXPECT_EQ(flushed.message().rfind("SyncDone of step 0 chunk 1: ", 0), 0u) << flushed;
  // From then on every call returns it, and nothing more is sent.
  EXPECT_EQ(link->ReportStaged(0, 0, "expert").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(link->WaitForDirective(0, 0, absl::Seconds(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto status = server_->coordinator().GetJobStatus("async-refusal");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->counters.checkins, 1u);  // the expert check-in never went out
  EXPECT_EQ(status->counters.releases, 0u);
}

}  // namespace
}  // namespace worker
}  // namespace psync
