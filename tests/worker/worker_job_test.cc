// A coordinator (in process, real gRPC on a free port) and 4 psync-worker processes training the
// synthetic MoE model (W=4, E=2, 4 chunks, 10 steps, CPU + Gloo): coordinated, every rank's
// weights verify and the audit is clean; naive (Megatron before #4800), every rank detects the
// corruption (dense weights zeroed, expert weights garbage between the two syncs) and the
// coordinator audits the early and the repeated syncs.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "server/test_server.h"
#include "tests/worker/processes.h"

namespace psync {
namespace {

constexpr int kWorld = 4;
constexpr int kExperts = 2;
constexpr int kChunks = 4;
constexpr int kSteps = 10;
// Bounds the whole job; it takes a few seconds on 2 cores.
constexpr absl::Duration kJobTimeout = absl::Seconds(150);

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class WorkerJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<server::TestServer>> server = server::TestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = psync::v1::Coordinator::NewStub(
        grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  }

  // Runs the 4 ranks of `job` with `extra` flags and returns their results.
  std::vector<::psync::testing::ChildResult> RunJob(const std::string& job,
                                                    const std::vector<std::string>& extra) {
    ::psync::testing::ProcessGroup group;
    for (int rank = 0; rank < kWorld; ++rank) {
      std::vector<std::string> argv = {
          ::psync::testing::Runfile("worker/psync-worker"),
          absl::StrCat("--target=", server_->target()),
          absl::StrCat("--job=", job),
          absl::StrCat("--world_size=", kWorld),
          absl::StrCat("--rank=", rank),
          absl::StrCat("--expert_parallel=", kExperts),
          absl::StrCat("--chunks=", kChunks),
          absl::StrCat("--steps=", kSteps),
          "--timeout_s=60",
      };
      argv.insert(argv.end(), extra.begin(), extra.end());
      absl::Status spawned =
          group.Spawn(argv, ::psync::testing::TempPath(absl::StrCat(job, ".rank", rank, ".log")));
      EXPECT_TRUE(spawned.ok()) << spawned;
    }
    return group.Wait(kJobTimeout);
  }

  // psync-worker --audit of `job`: its exit code and output.
  ::psync::testing::ChildResult AuditCommand(const std::string& job) {
    ::psync::testing::ProcessGroup group;
    absl::Status spawned = group.Spawn(
        {::psync::testing::Runfile("worker/psync-worker"),
         absl::StrCat("--target=", server_->target()), absl::StrCat("--job=", job), "--audit"},
        ::psync::testing::TempPath(absl::StrCat(job, ".audit.log")));
    EXPECT_TRUE(spawned.ok()) << spawned;
    return group.Wait(absl::Seconds(60))[0];
  }

  psync::v1::GetAuditResponse Audit(const std::string& job) {
    psync::v1::GetAuditRequest request;
    request.set_job_id(job);
    psync::v1::GetAuditResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    grpc::Status status = stub_->GetAudit(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  std::unique_ptr<server::TestServer> server_;
  std::unique_ptr<psync::v1::Coordinator::Stub> stub_;
};

TEST_F(WorkerJobTest, CoordinatedJobVerifiesEveryStepOnEveryRank) {
  const std::vector<::psync::testing::ChildResult> ranks = RunJob("coordinated", {});
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kWorld));
  for (int rank = 0; rank < kWorld; ++rank) {
    const std::string output = ranks[rank].Output();
    SCOPED_TRACE(absl::StrCat("rank ", rank, " output:\n", output));
    EXPECT_FALSE(ranks[rank].killed_at_deadline);
    EXPECT_EQ(ranks[rank].exit_code, 0);
    EXPECT_TRUE(Contains(
        output, absl::StrCat("rank ", rank, " result: OK: all ", kSteps, " steps verified")));
    EXPECT_TRUE(Contains(output, absl::StrCat(kSteps * kChunks, " chunk syncs in ",
                                              kSteps * kChunks, " executions")));
    EXPECT_FALSE(Contains(output, "WRONG"));
  }
  const psync::v1::AuditTotals totals = Audit("coordinated").totals();
  EXPECT_EQ(totals.released(), static_cast<uint64_t>(kSteps * kChunks));
  EXPECT_EQ(totals.complete(), static_cast<uint64_t>(kSteps * kChunks));
  EXPECT_EQ(totals.double_releases(), 0u);
  EXPECT_EQ(totals.checksum_mismatches(), 0u);
  EXPECT_EQ(totals.early_syncs(), 0u);
  EXPECT_EQ(totals.repeated_syncs(), 0u);

  const ::psync::testing::ChildResult audit = AuditCommand("coordinated");
  EXPECT_EQ(audit.exit_code, 0) << audit.Output();
  EXPECT_TRUE(Contains(audit.Output(), "coordinator audit: CLEAN")) << audit.Output();
}

TEST_F(WorkerJobTest, NaiveJobIsCaughtByTheRanksAndByTheAudit) {
  const std::vector<::psync::testing::ChildResult> ranks = RunJob("naive", {"--sync=naive"});
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kWorld));
  for (int rank = 0; rank < kWorld; ++rank) {
    const std::string output = ranks[rank].Output();
    SCOPED_TRACE(absl::StrCat("rank ", rank, " output:\n", output));
    EXPECT_FALSE(ranks[rank].killed_at_deadline);
    EXPECT_EQ(ranks[rank].exit_code, 1);  // wrong weights, not a crash
    EXPECT_TRUE(Contains(output, absl::StrCat("rank ", rank, " result: FAIL: ", kSteps, " of ",
                                              kSteps, " steps ended with wrong weights")));
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      // The dense weights end every step zeroed ...
      EXPECT_TRUE(Contains(output, absl::StrCat("chunk ", chunk,
                                                " dense weights (dp) wrong at "
                                                "the end of ",
                                                kSteps, " of ", kSteps,
                                                " steps: up to 100.0% of the elements wrong, "
                                                "100.0% zeroed")));
      // ... and the expert weights held garbage after the first of the two syncs.
      EXPECT_TRUE(
          Contains(output, absl::StrCat("chunk ", chunk, " expert weights (edp", rank % kExperts,
                                        ") wrong after sync 1 of 2 in ", kSteps,
                                        " steps (ran after the dense optimizer "
                                        "staged, before the expert optimizer staged)")));
    }
    EXPECT_TRUE(Contains(output, absl::StrCat(kSteps * kChunks, " chunk syncs in ",
                                              2 * kSteps * kChunks, " executions")));
  }

  const psync::v1::AuditTotals totals = Audit("naive").totals();
  // Each rank's first sync of each chunk ran before the chunk's release.
  EXPECT_GE(totals.early_syncs(), static_cast<uint64_t>(kWorld * kChunks * kSteps));
  EXPECT_EQ(totals.double_releases(), 0u);  // the coordinator itself released each chunk once
  // Every replica gathered the same zeros: cross-replica checksums cannot see this corruption.
  EXPECT_EQ(totals.checksum_mismatches(), 0u);
  // Each rank ran each chunk's sync twice, and its SyncDone says so.
  EXPECT_GE(totals.repeated_syncs(), static_cast<uint64_t>(kWorld * kChunks * kSteps));

  const ::psync::testing::ChildResult audit = AuditCommand("naive");
  EXPECT_EQ(audit.exit_code, 1) << audit.Output();
  EXPECT_TRUE(Contains(audit.Output(), "coordinator audit: VIOLATIONS: ")) << audit.Output();
  EXPECT_TRUE(Contains(audit.Output(), "early syncs (SyncDone before the release) in steps 0-9"))
      << audit.Output();
  EXPECT_TRUE(Contains(audit.Output(), "repeated syncs (a rank synced twice) in steps 0-9"))
      << audit.Output();
}

}  // namespace
}  // namespace psync
