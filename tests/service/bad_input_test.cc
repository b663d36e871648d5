// Every bad input over real gRPC: the exact status code, a message naming the field, and no change
// to the job's state (GetJobStatus before and after are identical but for the rejected counter).
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/coordinator_server.h"
#include "tests/service/raw_session.h"
#include "tests/service/service_fixture.h"

namespace psync::testing {
namespace {

using ::testing::HasSubstr;

class BadInputTest : public ServiceFixture {
 protected:
  grpc::Status Join(const v1::JoinRequest& request, v1::JoinResponse* response = nullptr) {
    grpc::ClientContext context;
    v1::JoinResponse ignored;
    return stub_->Join(&context, request, response != nullptr ? response : &ignored);
  }

  // Job "j": 2 ranks, 2 chunks; chunk 1 also has expert params (E=2: edp0=[0], edp1=[1]).
  void JoinBoth() {
    for (uint32_t r = 0; r < 2; ++r) {
      ASSERT_TRUE(Join(MakeJoin("j", 2, r, 2, {1}, 2), &joined_[r]).ok());
    }
  }

  std::unique_ptr<RawSession> Attach(uint32_t rank) {
    auto session = std::make_unique<RawSession>(stub_.get());
    grpc::Status s =
        session->Attach("j", rank, joined_[rank].generation(), joined_[rank].session_id());
    EXPECT_TRUE(s.ok()) << s.error_message();
    return session;
  }

  v1::JobStatus Status(const std::string& job = "j") { return JobStatus(job); }

  // The job's state but for the rejected counter.
  v1::JobStatus State(const std::string& job = "j") {
    v1::JobStatus status = Status(job);
    status.mutable_counters()->clear_rejected();
    return status;
  }

  void ExpectUnchanged(const v1::JobStatus& before, const std::string& job = "j") {
    v1::JobStatus after = State(job);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before, after))
        << "before:\n"
        << before.DebugString() << "after:\n"
        << after.DebugString();
  }

  v1::JoinResponse joined_[2];
};

// ---- Join ----

TEST_F(BadInputTest, JoinWithEmptyJobIdIsInvalidArgument) {
  grpc::Status s = Join(MakeJoin("", 2, 0, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("job_id must be 1..128 characters"));
  grpc::ClientContext context;
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(stub_->ListJobs(&context, v1::ListJobsRequest(), &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
}

TEST_F(BadInputTest, JoinWithEmptyIncarnationIsInvalidArgument) {
  v1::JoinRequest request = MakeJoin("j", 2, 0, 2);
  request.clear_incarnation();
  grpc::Status s = Join(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("incarnation"));
}

TEST_F(BadInputTest, JoinWithRankOutsideWorldIsInvalidArgument) {
  ASSERT_TRUE(Join(MakeJoin("j", 2, 0, 2)).ok());
  v1::JobStatus before = State();
  grpc::Status s = Join(MakeJoin("j", 2, 2, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("rank 2 out of range [0, 2)"));
  ExpectUnchanged(before);
}

TEST_F(BadInputTest, JoinWithUnknownChunkIsInvalidArgument) {
  v1::JoinRequest request = MakeJoin("j", 2, 0, 2);
  request.mutable_chunks(1)->set_chunk(9);
  grpc::Status s = Join(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("chunks[1].chunk 9 out of range [0, 2)"));
}

TEST_F(BadInputTest, JoinWithDifferentWorldSizeIsFailedPrecondition) {
  ASSERT_TRUE(Join(MakeJoin("j", 2, 0, 2)).ok());
  v1::JobStatus before = State();
  grpc::Status s = Join(MakeJoin("j", 3, 1, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("world_size 3 of rank 1 conflicts with 2"));
  ExpectUnchanged(before);
}

TEST_F(BadInputTest, JoinWithDifferentChunkCountIsFailedPrecondition) {
  ASSERT_TRUE(Join(MakeJoin("j", 2, 0, 2)).ok());
  v1::JobStatus before = State();
  grpc::Status s = Join(MakeJoin("j", 2, 1, 3));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("num_chunks 3 of rank 1 conflicts with 2"));
  ExpectUnchanged(before);
}

TEST_F(BadInputTest, JoinWithConflictingGroupMembershipIsFailedPrecondition) {
  ASSERT_TRUE(Join(MakeJoin("j", 3, 0, 1)).ok());
  v1::JobStatus before = State();
  v1::JoinRequest request = MakeJoin("j", 3, 1, 1);
  request.mutable_chunks(0)->mutable_groups(0)->clear_ranks();
  request.mutable_chunks(0)->mutable_groups(0)->add_ranks(1);
  request.mutable_chunks(0)->mutable_groups(0)->add_ranks(2);
  grpc::Status s = Join(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(),
              HasSubstr("chunk 0 group 'dp' declared by rank 1 as [1,2] but earlier as [0,1,2]"));
  ExpectUnchanged(before);
}

TEST_F(BadInputTest, OversizedMessageIsResourceExhausted) {
  v1::JoinRequest request = MakeJoin("j", 2, 0, 2);
  request.set_incarnation(std::string(2 << 20, 'x'));
  grpc::Status s = Join(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  grpc::ClientContext context;
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(stub_->ListJobs(&context, v1::ListJobsRequest(), &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
}

// ---- Attach ----

TEST_F(BadInputTest, AttachToUnknownJobIsNotFound) {
  RawSession session(stub_.get());
  grpc::Status s = session.Attach("nope", 0, 1, "x");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("job_id 'nope' is not known"));
}

TEST_F(BadInputTest, AttachWithRankOutsideWorldIsInvalidArgument) {
  JoinBoth();
  RawSession session(stub_.get());
  grpc::Status s = session.Attach("j", 5, joined_[0].generation(), joined_[0].session_id());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("rank 5 out of range [0, 2)"));
}

TEST_F(BadInputTest, AttachWithFutureGenerationIsFailedPrecondition) {
  JoinBoth();
  RawSession session(stub_.get());
  grpc::Status s = session.Attach("j", 0, joined_[0].generation() + 1, joined_[0].session_id());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("generation 2 is in the future (never issued)"));
}

TEST_F(BadInputTest, AttachWithAnotherRanksSessionIsPermissionDenied) {
  JoinBoth();
  RawSession session(stub_.get());
  grpc::Status s = session.Attach("j", 0, joined_[1].generation(), joined_[1].session_id());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("session_id"));
}

TEST_F(BadInputTest, FirstMessageMustBeAttach) {
  JoinBoth();
  RawSession session(stub_.get());
  grpc::ClientContext context;
  auto stream = stub_->Session(&context);
  v1::SessionUp up;
  up.mutable_skip()->set_step(0);
  ASSERT_TRUE(stream->Write(up));
  stream->WritesDone();
  v1::SessionDown down;
  while (stream->Read(&down)) {
  }
  grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("first message of a Session must be attach"));
}

TEST_F(BadInputTest, SecondSessionForTheSameRankSupersedesTheFirst) {
  JoinBoth();
  auto first = Attach(0);
  auto second = Attach(0);
  EXPECT_EQ(first->Finish().error_code(), grpc::StatusCode::ABORTED);
  EXPECT_TRUE(second->Stage(joined_[0].generation(), 0, 0, "dense").ok());
  EXPECT_EQ(Status().sessions_connected(), 1u);
}

// ---- Session messages ----

TEST_F(BadInputTest, UnknownChunkIsInvalidArgument) {
  JoinBoth();
  auto session = Attach(0);
  v1::JobStatus before = State();
  grpc::Status s = session->Stage(joined_[0].generation(), 0, 7, "dense");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("items[0].chunk 7 out of range [0, 2)"));
  ExpectUnchanged(before);
  EXPECT_EQ(Status().counters().rejected(), 1u);
}

TEST_F(BadInputTest, UndeclaredOptimizerIsInvalidArgument) {
  JoinBoth();
  auto session = Attach(0);
  v1::JobStatus before = State();
  grpc::Status s = session->Stage(joined_[0].generation(), 0, 0, "expert");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(),
              HasSubstr("items[0].optimizer 'expert' is not declared by rank 0 for chunk 0"));
  ExpectUnchanged(before);
}

TEST_F(BadInputTest, StepInThePastIsOutOfRange) {
  for (uint32_t r = 0; r < 2; ++r) {
    v1::JoinRequest request = MakeJoin("j", 2, r, 2, {1}, 2);
    request.set_first_step(10);
    ASSERT_TRUE(Join(request, &joined_[r]).ok());
  }
  auto session = Attach(0);
  v1::JobStatus before = State();
  grpc::Status s = session->Stage(joined_[0].generation(), 9, 0, "dense");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(s.error_message(),
              HasSubstr("items[0].step 9 is before the oldest retained step 10"));
  ExpectUnchanged(before);
}

TEST_F(BadInputTest, NextStepBeforeSyncDoneIsFailedPrecondition) {
  JoinBoth();
  auto session = Attach(0);
  v1::JobStatus before = State();
  grpc::Status s = session->Stage(joined_[0].generation(), 1, 0, "dense");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(),
              HasSubstr("items[0].step 1: rank 0 has not finished step 0 (SyncDone missing for "
                        "chunks [0,1])"));
  ExpectUnchanged(before);
}

TEST_F(BadInputTest, StepTooFarAheadIsOutOfRange) {
  JoinBoth();
  auto session = Attach(0);
  v1::JobStatus before = State();
  grpc::Status s = session->Stage(joined_[0].generation(), 5, 0, "dense");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(s.error_message(),
              HasSubstr("items[0].step 5 is too far ahead: rank 0 is at step 0"));
  ExpectUnchanged(before);
}

TEST_F(BadInputTest, StaleOrFutureGenerationIsFailedPrecondition) {
  JoinBoth();
  auto session = Attach(0);
  v1::JobStatus before = State();
  grpc::Status s = session->Stage(joined_[0].generation() + 6, 0, 0, "dense");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(
      s.error_message(),
      HasSubstr("generation 7 is in the future (never issued): job 'j' is at generation 1"));
  s = session->Stage(0, 0, 0, "dense");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("generation 0 is stale: job 'j' is at generation 1"));
  ExpectUnchanged(before);
}

TEST_F(BadInputTest, SyncDoneBeforeTheDirectiveIsFailedPrecondition) {
  JoinBoth();
  auto session = Attach(0);
  ASSERT_TRUE(session->Stage(joined_[0].generation(), 0, 0, "dense").ok());
  v1::JobStatus before = State();
  // The only change: a sync executed before its release is counted as a violation (early sync).
  before.mutable_counters()->set_violations(1);
  before.mutable_audit()->set_early_syncs(1);
  grpc::Status s = session->SyncDone(joined_[0].generation(), 0, 0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(),
              HasSubstr("SyncDone before the directive: step 0 chunk 0 has not been released"));
  ExpectUnchanged(before);
}

TEST_F(BadInputTest, ConflictingDuplicateIsAlreadyExistsAndAViolation) {
  JoinBoth();
  auto session = Attach(0);
  v1::SessionUp up;
  up.mutable_staged()->set_generation(joined_[0].generation());
  v1::Staged* item = up.mutable_staged()->add_items();
  item->set_step(0);
  item->set_chunk(0);
  item->set_optimizer("dense");
  item->set_shard_checksum(0x1234);
  ASSERT_TRUE(session->Send(up).ok());
  ASSERT_TRUE(session->Send(up).ok()) << "an identical duplicate is answered OK";
  v1::JobStatus before = State();
  before.mutable_counters()->set_violations(1);  // the only change: the violation is counted
  up.mutable_staged()->mutable_items(0)->set_shard_checksum(0x9999);
  grpc::Status s = session->Send(up);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(s.error_message(),
              HasSubstr("already staged with shard_checksum 0x1234, now 0x9999"));
  ExpectUnchanged(before);
  EXPECT_EQ(Status().counters().duplicate_checkins(), 1u);
}

TEST_F(BadInputTest, EmptyBatchIsInvalidArgument) {
  JoinBoth();
  auto session = Attach(0);
  v1::JobStatus before = State();
  v1::SessionUp up;
  up.mutable_staged()->set_generation(joined_[0].generation());
  grpc::Status s = session->Send(up);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("items must have 1..4096 entries (got 0)"));
  ExpectUnchanged(before);
}

TEST_F(BadInputTest, BatchWithOneBadItemAppliesNothing) {
  JoinBoth();
  auto session = Attach(0);
  v1::JobStatus before = State();
  v1::SessionUp up;
  up.mutable_staged()->set_generation(joined_[0].generation());
  v1::Staged* good = up.mutable_staged()->add_items();
  good->set_chunk(0);
  good->set_optimizer("dense");
  v1::Staged* bad = up.mutable_staged()->add_items();
  bad->set_chunk(3);
  bad->set_optimizer("dense");
  grpc::Status s = session->Send(up);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("items[1].chunk 3"));
  ExpectUnchanged(before);
}

TEST_F(BadInputTest, MessageWithoutKindIsInvalidArgument) {
  JoinBoth();
  auto session = Attach(0);
  grpc::Status s = session->Send(v1::SessionUp());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("kind"));
}

// ---- Status ----

TEST_F(BadInputTest, StatusOfEmptyOrUnknownJob) {
  grpc::ClientContext c1;
  v1::GetJobStatusRequest request;
  v1::JobStatus status;
  EXPECT_EQ(stub_->GetJobStatus(&c1, request, &status).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.set_job_id("missing");
  grpc::ClientContext c2;
  grpc::Status s = stub_->GetJobStatus(&c2, request, &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("job_id 'missing' is not known"));
}

TEST(BadServerOptionsTest, DeliveryThreadsOutOfRangeAreRefusedNamingTheFlag) {
  for (int threads : {-1, 65}) {
    server::ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.coordinator.delivery_threads = threads;
    auto server = server::CoordinatorServer::Start(std::move(options));
    ASSERT_FALSE(server.ok()) << threads;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(server.status().message(),
              absl::StrCat("delivery_threads: ", threads, " is out of range [0, 64]"));
  }
}

}  // namespace
}  // namespace psync::testing
