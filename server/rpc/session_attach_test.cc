// AttachSession: an attach's fields are refused before the coordinator sees them; the
// coordinator's refusals come back with their code and "attach: " before their message; a
// refused attach attaches nothing (and supersedes nobody); a taken one returns the rank's pending
// notices and makes the sink the rank's session.
#include "server/rpc/session_attach.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serve/clock.h"
#include "server/owner/fake_sinks.h"

namespace psync::server {
namespace {

using ::psync::server::testing::CallLog;
using ::psync::server::testing::DensePlan;
using ::psync::server::testing::FakeSink;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class SessionAttachTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (core::RankId r = 0; r < 2; ++r) {
      absl::StatusOr<core::JoinResult> joined = coordinator_.Join(DensePlan("job", r, 2, 1));
      ASSERT_TRUE(joined.ok()) << joined.status();
      session_ids_.push_back(joined->session_id);
    }
  }

  v1::Attach AttachOf(core::RankId rank) const {
    v1::Attach a;
    a.set_job_id("job");
    a.set_rank(rank);
    a.set_generation(1);
    a.set_session_id(session_ids_[rank]);
    return a;
  }

  absl::Status Refusal(const v1::Attach& a) {
    auto sink = std::make_shared<FakeSink>("refused", &log_);
    return AttachSession(coordinator_, a, sink).status();
  }

  size_t Rejections() {
    uint64_t next = 0;
    size_t n = 0;
    for (const core::Event& e : coordinator_.EventsSince(0, &next)) {
      if (e.kind == core::EventKind::kRejected) ++n;
    }
    return n;
  }

  uint32_t Sessions() { return coordinator_.GetJobStatus("job")->sessions_connected; }

  serve::FakeClock clock_;
  Coordinator coordinator_{CoordinatorOptions(), &clock_};
  std::vector<std::string> session_ids_;
  CallLog log_;
};

// An attach without a job never reaches a tracker; the refusal is recorded (a kRejected event),
// and counted by no job.
TEST_F(SessionAttachTest, AMissingJobIsRecordedButReachesNoJob) {
  v1::Attach a = AttachOf(0);
  a.clear_job_id();
  EXPECT_EQ(Refusal(a), absl::InvalidArgumentError("attach: attach.job_id must not be empty"));
  EXPECT_EQ(Rejections(), 1u);
  EXPECT_EQ(coordinator_.GetJobStatus("job")->counters.rejected, 0u);
  EXPECT_EQ(Sessions(), 0u);
}

// An empty session id names a job, which counts the refusal like every other refused attach.
TEST_F(SessionAttachTest, AMissingSessionIdIsCountedByTheJob) {
  v1::Attach a = AttachOf(0);
  a.clear_session_id();
  EXPECT_EQ(Refusal(a), absl::InvalidArgumentError("attach: session_id must not be empty"));
  EXPECT_EQ(Rejections(), 1u);
  EXPECT_EQ(coordinator_.GetJobStatus("job")->counters.rejected, 1u);
  EXPECT_EQ(Sessions(), 0u);
}

TEST_F(SessionAttachTest, CoordinatorRefusalsArePrefixed) {
  v1::Attach a = AttachOf(0);
  a.set_job_id("nope");
  EXPECT_EQ(Refusal(a), absl::NotFoundError("attach: job_id 'nope' is not known; Join first"));
  a = AttachOf(0);
  a.set_generation(2);
  EXPECT_EQ(Refusal(a), absl::FailedPreconditionError(
                            "attach: generation 2 is in the future (never issued): job 'job' is "
                            "at generation 1; join again"));
  a = AttachOf(0);
  a.set_session_id(session_ids_[1]);
  EXPECT_EQ(Refusal(a), absl::PermissionDeniedError(
                            "attach: session_id does not match the session issued to rank 0"));
  EXPECT_EQ(Rejections(), 3u);
  EXPECT_EQ(Sessions(), 0u);
  EXPECT_THAT(log_.Take(), IsEmpty());
}

TEST_F(SessionAttachTest, TakenAttachReturnsPendingAndARefusedOneSupersedesNobody) {
  // Rank 0 attaches; both stage; the release is pending for rank 1, which has no session yet.
  auto a = std::make_shared<FakeSink>("a", &log_);
  absl::StatusOr<std::vector<core::Notice>> pending = AttachSession(coordinator_, AttachOf(0), a);
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_THAT(*pending, IsEmpty());
  ASSERT_TRUE(coordinator_.Stage("job", 0, 1, {core::testing::Item(0, 0, "dense")}).ok());
  ASSERT_TRUE(coordinator_.Stage("job", 1, 1, {core::testing::Item(0, 0, "dense")}).ok());
  EXPECT_THAT(log_.Take(), ElementsAre("a directive g1 s0 c0 seq1"));

  // A refused attach of rank 0 leaves `a` attached.
  v1::Attach wrong = AttachOf(0);
  wrong.set_session_id("forged");
  EXPECT_EQ(Refusal(wrong).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(log_.Take(), IsEmpty());
  EXPECT_EQ(Sessions(), 1u);

  auto b = std::make_shared<FakeSink>("b", &log_);
  pending = AttachSession(coordinator_, AttachOf(1), b);
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ(core::testing::NoticeText((*pending)[0]), "directive g1 s0 c0 seq1");
  EXPECT_THAT(log_.Take(), IsEmpty());  // pending notices are the caller's to write
  EXPECT_EQ(Sessions(), 2u);
}

}  // namespace
}  // namespace psync::server
