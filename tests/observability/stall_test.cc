// A job with one rank held back: within one inspection after the chunk's deadline the coordinator
// names the missing (rank, optimizer) through GetChunkStatus, GetJobStatus and a WatchEvents
// stream. Time is a FakeClock moved by the test; EnforceLiveness() is called by the test.
#include <memory>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/service/raw_session.h"
#include "tests/service/service_fixture.h"

namespace psync::testing {
namespace {

using ::testing::HasSubstr;

class StallTest : public ServiceFixture {
 protected:
  void SetUp() override {
    server::CoordinatorOptions options;
    options.observer.deadline.initial = absl::Milliseconds(500);
    options.observer.stall_list_limit = 2;  // a stall names at most 2 of the missing
    ASSERT_NO_FATAL_FAILURE(StartServer(options));
    for (uint32_t r = 0; r < 3; ++r) {
      sessions_[r] = JoinAndAttach(MakeJoin("j", 3, r, 1, {0}, 3), &joined_[r]);
      ASSERT_FALSE(HasFailure());
    }
  }

  v1::JoinResponse joined_[3];
  std::unique_ptr<RawSession> sessions_[3];
};

TEST_F(StallTest, HeldBackRankIsNamedRightAfterTheDeadline) {
  // A watcher for stalls of this job.
  grpc::ClientContext watch_context;
  v1::WatchEventsRequest watch;
  watch.set_job_id("j");
  watch.add_kinds("stall");
  auto reader = stub_->WatchEvents(&watch_context, watch);

  // Everyone but rank 2's expert optimizer stages step 0.
  for (uint32_t r = 0; r < 3; ++r) {
    ASSERT_TRUE(sessions_[r]->Stage(joined_[r].generation(), 0, 0, "dense").ok());
    if (r != 2) {
      ASSERT_TRUE(sessions_[r]->Stage(joined_[r].generation(), 0, 0, "expert").ok());
    }
  }
  clock_.Advance(absl::Milliseconds(499));
  EXPECT_TRUE(server_->coordinator().EnforceLiveness().empty()) << "not yet past the deadline";
  clock_.Advance(absl::Milliseconds(2));
  std::vector<core::Event> stalls = server_->coordinator().EnforceLiveness();
  ASSERT_EQ(stalls.size(), 1u);

  v1::Event event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.kind(), "stall");
  EXPECT_EQ(event.step(), 0u);
  EXPECT_EQ(event.chunk(), 0u);
  EXPECT_EQ(event.duration_micros(), 501000);
  ASSERT_EQ(event.contributors_size(), 1);
  EXPECT_EQ(event.contributors(0).rank(), 2u);
  EXPECT_EQ(event.contributors(0).optimizer(), "expert");
  EXPECT_THAT(event.detail(), HasSubstr("for rank 2 expert"));
  EXPECT_EQ(event.missing_count(), 1u);

  grpc::ClientContext chunk_context;
  v1::GetChunkStatusRequest chunk_request;
  chunk_request.set_job_id("j");
  chunk_request.set_step(0);
  chunk_request.set_chunk(0);
  v1::ChunkStatus chunk;
  ASSERT_TRUE(stub_->GetChunkStatus(&chunk_context, chunk_request, &chunk).ok());
  EXPECT_EQ(chunk.state(), "WAITING");
  EXPECT_EQ(chunk.staged_size(), 5);
  EXPECT_EQ(chunk.staged_after_micros_size(), 5);
  ASSERT_EQ(chunk.missing_size(), 1);
  EXPECT_EQ(chunk.missing(0).rank(), 2u);
  EXPECT_EQ(chunk.waiting_micros(), 501000);
  EXPECT_EQ(chunk.deadline_micros(), 500000);

  grpc::ClientContext status_context;
  v1::GetJobStatusRequest status_request;
  status_request.set_job_id("j");
  v1::JobStatus status;
  ASSERT_TRUE(stub_->GetJobStatus(&status_context, status_request, &status).ok());
  EXPECT_EQ(status.counters().stalls(), 1u);

  // The rank arrives; the chunk releases; the straggler table names it.
  ASSERT_TRUE(sessions_[2]->Stage(joined_[2].generation(), 0, 0, "expert").ok());
  grpc::ClientContext after_context;
  v1::JobStatus after;
  ASSERT_TRUE(stub_->GetJobStatus(&after_context, status_request, &after).ok());
  ASSERT_GE(after.stragglers_size(), 1);
  EXPECT_EQ(after.stragglers(0).rank(), 2u);
  EXPECT_DOUBLE_EQ(after.stragglers(0).last_seconds(), 0.501);
  EXPECT_EQ(after.audit().released(), 1u);

  watch_context.TryCancel();
  while (reader->Read(&event)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

// More missing than a stall names: the event lists the first ones and counts them all, and
// GetChunkStatus with a list_limit lists as few, with the same counts.
TEST_F(StallTest, AStallNamesTheFirstMissingAndCountsThemAll) {
  grpc::ClientContext watch_context;
  v1::WatchEventsRequest watch;
  watch.set_job_id("j");
  watch.add_kinds("stall");
  auto reader = stub_->WatchEvents(&watch_context, watch);
  // Only rank 1 stages: ranks 0 and 2 hold the chunk back with both optimizers.
  ASSERT_TRUE(sessions_[1]->Stage(joined_[1].generation(), 0, 0, "dense").ok());
  ASSERT_TRUE(sessions_[1]->Stage(joined_[1].generation(), 0, 0, "expert").ok());
  clock_.Advance(absl::Milliseconds(501));
  ASSERT_EQ(server_->coordinator().EnforceLiveness().size(), 1u);
  v1::Event event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.kind(), "stall");
  ASSERT_EQ(event.contributors_size(), 2);
  EXPECT_EQ(event.contributors(0).rank(), 0u);
  EXPECT_EQ(event.contributors(0).optimizer(), "dense");
  EXPECT_EQ(event.contributors(1).rank(), 0u);
  EXPECT_EQ(event.contributors(1).optimizer(), "expert");
  EXPECT_EQ(event.missing_count(), 4u);
  EXPECT_EQ(event.detail(),
            "chunk 0 step 0 waited 501ms (deadline 500ms) for rank 0 dense, rank 0 expert and 2 "
            "more");

  grpc::ClientContext chunk_context;
  v1::GetChunkStatusRequest chunk_request;
  chunk_request.set_job_id("j");
  chunk_request.set_step(0);
  chunk_request.set_chunk(0);
  chunk_request.set_list_limit(1);
  v1::ChunkStatus chunk;
  ASSERT_TRUE(stub_->GetChunkStatus(&chunk_context, chunk_request, &chunk).ok());
  ASSERT_EQ(chunk.staged_size(), 1);
  EXPECT_EQ(chunk.staged(0).rank(), 1u);
  EXPECT_EQ(chunk.staged(0).optimizer(), "dense");
  EXPECT_EQ(chunk.staged_after_micros_size(), 1);
  ASSERT_EQ(chunk.missing_size(), 1);
  EXPECT_EQ(chunk.missing(0).rank(), 0u);
  EXPECT_EQ(chunk.staged_count(), 2u);
  EXPECT_EQ(chunk.missing_count(), 4u);
  watch_context.TryCancel();
  while (reader->Read(&event)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(StallTest, GetChunkStatusBadInput) {
  grpc::ClientContext c1;
  v1::GetChunkStatusRequest request;
  request.set_job_id("j");
  request.set_chunk(9);
  v1::ChunkStatus chunk;
  grpc::Status s = stub_->GetChunkStatus(&c1, request, &chunk);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("chunk 9 out of range [0, 1)"));
  grpc::ClientContext c2;
  request.set_job_id("nope");
  EXPECT_EQ(stub_->GetChunkStatus(&c2, request, &chunk).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(StallTest, WatchEventsReplaysAndFilters) {
  ASSERT_TRUE(sessions_[0]->Stage(joined_[0].generation(), 0, 0, "dense").ok());
  grpc::ClientContext context;
  v1::WatchEventsRequest watch;
  watch.set_job_id("j");
  watch.add_kinds("checkin");
  watch.add_kinds("join");
  watch.set_replay(true);
  auto reader = stub_->WatchEvents(&context, watch);
  // Replay: 3 joins, then the check-in; then a live check-in.
  ASSERT_TRUE(sessions_[1]->Stage(joined_[1].generation(), 0, 0, "dense").ok());
  std::vector<std::string> seen;
  uint64_t last_index = 0;
  v1::Event e;
  for (int i = 0; i < 5 && reader->Read(&e); ++i) {
    seen.push_back(absl::StrCat(e.kind(), ":", e.has_rank() ? e.rank() : 99));
    if (i > 0) {
      EXPECT_GT(e.index(), last_index);
    }
    last_index = e.index();
  }
  EXPECT_EQ(seen,
            (std::vector<std::string>{"join:0", "join:1", "join:2", "checkin:0", "checkin:1"}));
  context.TryCancel();
  while (reader->Read(&e)) {
  }
  reader->Finish();
}

}  // namespace
}  // namespace psync::testing
