// Rank loss: a rank whose Session ends is named lost after its lease (the job is DEGRADED and the
// chunks it blocks are reported), and after lost_rank_abort_after every other rank gets Abort so it
// can leave its collectives; the job recovers when ranks join again (a new generation).
#include <memory>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/service/raw_session.h"
#include "tests/service/service_fixture.h"

namespace psync::testing {
namespace {

using ::testing::HasSubstr;

class LivenessTest : public ServiceFixture {
 protected:
  void SetUp() override {
    server::CoordinatorOptions options;
    options.rank_lease = absl::Seconds(2);
    options.lost_rank_abort_after = absl::Seconds(5);
    options.observer.deadline.initial = absl::Minutes(5);  // no stall events in these tests
    ASSERT_NO_FATAL_FAILURE(StartServer(options));
    for (uint32_t r = 0; r < 3; ++r) {
      sessions_[r] = JoinAndAttach(MakeJoin("j", 3, r, 1), &joined_[r]);
      ASSERT_FALSE(HasFailure());
    }
  }

  v1::JobStatus Status() { return JobStatus("j"); }

  // Waits (bounded) until the coordinator has noticed that rank `r`'s stream ended.
  void AwaitDetached(int sessions_left) {
    for (int i = 0; i < 2000 && Status().sessions_connected() != sessions_left; ++i) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_EQ(Status().sessions_connected(), sessions_left);
  }

  v1::JoinResponse joined_[3];
  std::unique_ptr<RawSession> sessions_[3];
};

TEST_F(LivenessTest, LostRankDegradesThenAbortsEveryOtherRank) {
  ASSERT_TRUE(sessions_[0]->Stage(joined_[0].generation(), 0, 0, "dense").ok());
  ASSERT_TRUE(sessions_[1]->Stage(joined_[1].generation(), 0, 0, "dense").ok());
  ASSERT_TRUE(sessions_[2]->Finish().ok());  // rank 2 goes away before staging
  AwaitDetached(2);

  clock_.Advance(absl::Milliseconds(1999));
  EXPECT_TRUE(server_->coordinator().EnforceLiveness().empty());
  EXPECT_EQ(Status().state(), "RUNNING");

  clock_.Advance(absl::Milliseconds(1));
  std::vector<core::Event> found = server_->coordinator().EnforceLiveness();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, core::EventKind::kRankLost);
  EXPECT_EQ(*found[0].rank, 2u);
  EXPECT_THAT(found[0].detail, HasSubstr("rank 2 lost: no session for 2s"));
  v1::JobStatus degraded = Status();
  EXPECT_EQ(degraded.state(), "DEGRADED");
  ASSERT_EQ(degraded.lost_ranks_size(), 1);
  EXPECT_EQ(degraded.lost_ranks(0), 2u);
  ASSERT_EQ(degraded.chunks(0).missing_size(), 1);
  EXPECT_EQ(degraded.chunks(0).missing(0).rank(), 2u) << "the blocked chunk names the lost rank";

  clock_.Advance(absl::Seconds(3));
  server_->coordinator().EnforceLiveness();
  for (uint32_t r : {0u, 1u}) {
    v1::SessionDown notice;
    ASSERT_TRUE(sessions_[r]->ReadNotice(&notice));
    ASSERT_TRUE(notice.has_abort());
    EXPECT_EQ(notice.abort().generation(), joined_[r].generation());
    EXPECT_THAT(notice.abort().reason(), HasSubstr("rank 2 lost"));
  }
  EXPECT_EQ(Status().state(), "ABORTED");
  EXPECT_EQ(sessions_[0]->Stage(joined_[0].generation(), 0, 0, "dense").error_code(),
            grpc::StatusCode::ABORTED);

  // Everyone joins again: generation 2, running, nobody lost.
  v1::JoinResponse again[3];
  for (uint32_t r = 0; r < 3; ++r) {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Join(&context, MakeJoin("j", 3, r, 1), &again[r]).ok());
    EXPECT_EQ(again[r].generation(), joined_[r].generation() + 1);
  }
  v1::JobStatus recovered = Status();
  EXPECT_EQ(recovered.state(), "RUNNING");
  EXPECT_EQ(recovered.lost_ranks_size(), 0);
}

TEST_F(LivenessTest, RankThatReattachesWithinTheLeaseIsNotLost) {
  ASSERT_TRUE(sessions_[2]->Finish().ok());
  AwaitDetached(2);
  clock_.Advance(absl::Seconds(1));
  sessions_[2] = std::make_unique<RawSession>(stub_.get());
  ASSERT_TRUE(sessions_[2]->Attach("j", 2, joined_[2].generation(), joined_[2].session_id()).ok());
  clock_.Advance(absl::Seconds(10));
  EXPECT_TRUE(server_->coordinator().EnforceLiveness().empty());
  EXPECT_EQ(Status().state(), "RUNNING");
}

}  // namespace
}  // namespace psync::testing
