// The Session contract over real gRPC, case by case (proto/psync/v1/coordinator.proto, rpc
// Session):
//   - a refused first message (every way an attach can be refused, a first message that is not
//     attach, bytes that do not parse) ends the stream with the refusal's status and no Ack;
//   - every later message is answered by an Ack, except bytes that do not parse, which end the
//     stream with INVALID_ARGUMENT (there is no request_id to answer).
// Each case asserts the exact code, that the message names the field, that it is counted once as
// rejected (the job's counter when the refusal names a known job, and one kRejected event either
// way), and that nothing else about the job changed.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/service/raw_session.h"
#include "tests/service/service_fixture.h"

namespace psync::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Bytes that are not a SessionUp: field 2 (attach) declares 5 bytes and carries 2.
const std::string kGarbage(
    "\x12\x05"
    "ab",
    4);

using Outcome = RawOutcome;

class SessionContractTest : public ServiceFixture {
 protected:
  // Job "j": 2 ranks, 1 chunk, both joined.
  void JoinBoth() {
    for (uint32_t r = 0; r < 2; ++r) {
      grpc::ClientContext context;
      ASSERT_TRUE(stub_->Join(&context, MakeJoin("j", 2, r, 1), &joined_[r]).ok());
    }
  }

  v1::SessionUp AttachUp(const std::string& job, uint32_t rank, uint64_t generation,
                         const std::string& session_id) {
    v1::SessionUp up;
    up.set_request_id(1);
    up.mutable_attach()->set_job_id(job);
    up.mutable_attach()->set_rank(rank);
    up.mutable_attach()->set_generation(generation);
    up.mutable_attach()->set_session_id(session_id);
    return up;
  }

  Outcome RunRaw(const std::vector<std::string>& frames) {
    return RunRawSession(channel_.get(), frames);
  }

  Outcome Run(const std::vector<v1::SessionUp>& messages) {
    std::vector<std::string> frames;
    for (const v1::SessionUp& up : messages) frames.push_back(up.SerializeAsString());
    return RunRaw(frames);
  }

  // Job j's state: its status but for the rejected counter and, with `sessions_too`, the count of
  // connected sessions.
  v1::JobStatus State(bool sessions_too = false) {
    v1::JobStatus status = JobStatus("j");
    status.mutable_counters()->clear_rejected();
    if (sessions_too) status.clear_sessions_connected();
    return status;
  }
  uint64_t Rejected() { return JobStatus("j").counters().rejected(); }
  size_t RejectedEvents() {
    uint64_t next = 0;
    size_t n = 0;
    for (const core::Event& e : server_->coordinator().EventsSince(0, &next)) {
      if (e.kind == core::EventKind::kRejected) ++n;
    }
    return n;
  }

  // Runs a refused first message and checks the whole contract for it.
  void ExpectRefused(const std::vector<std::string>& frames, grpc::StatusCode code,
                     const std::string& names, uint64_t counted_by_job) {
    const v1::JobStatus before = State();
    const uint64_t rejected = Rejected();
    const size_t events = RejectedEvents();
    const Outcome outcome = RunRaw(frames);
    EXPECT_EQ(outcome.status.error_code(), code) << outcome.status.error_message();
    EXPECT_THAT(outcome.status.error_message(), HasSubstr(names));
    EXPECT_THAT(outcome.down, IsEmpty()) << "a refused first message gets no Ack";
    EXPECT_EQ(Rejected(), rejected + counted_by_job);
    EXPECT_EQ(RejectedEvents(), events + 1);
    const v1::JobStatus after = State();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before, after))
        << "before:\n"
        << before.DebugString() << "after:\n"
        << after.DebugString();
  }
  void ExpectRefused(const v1::SessionUp& first, grpc::StatusCode code, const std::string& names,
                     uint64_t counted_by_job) {
    ExpectRefused(std::vector<std::string>{first.SerializeAsString()}, code, names, counted_by_job);
  }

  v1::JoinResponse joined_[2];
};

TEST_F(SessionContractTest, UnknownJobIsNotFound) {
  JoinBoth();
  // No job to count it: a kRejected event only.
  ExpectRefused(AttachUp("nope", 0, 1, "x"), grpc::StatusCode::NOT_FOUND,
                "attach: job_id 'nope' is not known", 0);
}

TEST_F(SessionContractTest, EmptyJobIdIsInvalidArgument) {
  JoinBoth();
  ExpectRefused(AttachUp("", 0, 1, "x"), grpc::StatusCode::INVALID_ARGUMENT,
                "attach: attach.job_id must not be empty", 0);
}

TEST_F(SessionContractTest, WrongSessionIdIsPermissionDenied) {
  JoinBoth();
  ExpectRefused(AttachUp("j", 0, joined_[0].generation(), joined_[1].session_id()),
                grpc::StatusCode::PERMISSION_DENIED,
                "attach: session_id does not match the session issued to rank 0", 1);
}

TEST_F(SessionContractTest, EmptySessionIdIsInvalidArgumentAndCounted) {
  JoinBoth();
  ExpectRefused(AttachUp("j", 0, joined_[0].generation(), ""), grpc::StatusCode::INVALID_ARGUMENT,
                "attach: session_id must not be empty", 1);
}

TEST_F(SessionContractTest, RankOutOfRangeIsInvalidArgument) {
  JoinBoth();
  ExpectRefused(AttachUp("j", 5, joined_[0].generation(), joined_[0].session_id()),
                grpc::StatusCode::INVALID_ARGUMENT, "attach: rank 5 out of range [0, 2)", 1);
}

TEST_F(SessionContractTest, StaleGenerationIsFailedPrecondition) {
  JoinBoth();
  ASSERT_EQ(joined_[0].generation(), 1u);
  ExpectRefused(AttachUp("j", 0, 0, joined_[0].session_id()), grpc::StatusCode::FAILED_PRECONDITION,
                "attach: generation 0 is stale: job 'j' is at generation 1", 1);
}

TEST_F(SessionContractTest, FutureGenerationIsFailedPrecondition) {
  JoinBoth();
  ExpectRefused(AttachUp("j", 0, 2, joined_[0].session_id()), grpc::StatusCode::FAILED_PRECONDITION,
                "attach: generation 2 is in the future (never issued): job 'j' is at generation 1",
                1);
}

TEST_F(SessionContractTest, FirstMessageNotAttachIsInvalidArgument) {
  JoinBoth();
  v1::SessionUp staged;
  staged.set_request_id(1);
  staged.mutable_staged()->set_generation(joined_[0].generation());
  // It names no job: a kRejected event only.
  ExpectRefused(staged, grpc::StatusCode::INVALID_ARGUMENT,
                "attach: the first message of a Session must be attach", 0);
}

TEST_F(SessionContractTest, FirstMessageThatDoesNotParseIsInvalidArgument) {
  JoinBoth();
  ExpectRefused(std::vector<std::string>{kGarbage}, grpc::StatusCode::INVALID_ARGUMENT,
                "attach: the message does not parse as a psync.v1.SessionUp", 0);
}

TEST_F(SessionContractTest, TooManySessionsIsResourceExhausted) {
  server::CoordinatorOptions options;
  options.max_sessions = 1;
  StartServer(options);
  JoinBoth();
  RawSession first(stub_.get());
  ASSERT_TRUE(first.Attach("j", 0, joined_[0].generation(), joined_[0].session_id()).ok());
  ExpectRefused(AttachUp("j", 1, joined_[1].generation(), joined_[1].session_id()),
                grpc::StatusCode::RESOURCE_EXHAUSTED,
                "attach: the coordinator already holds max_sessions=1 sessions", 1);
  EXPECT_EQ(JobStatus("j").sessions_connected(), 1u);
}

// After the attach every message is answered by an Ack, refusals included (each counted once).
TEST_F(SessionContractTest, LaterMessagesAreAnsweredByAnAckEach) {
  JoinBoth();
  v1::SessionUp again = AttachUp("j", 0, joined_[0].generation(), joined_[0].session_id());
  again.set_request_id(2);
  v1::SessionUp empty;
  empty.set_request_id(3);
  v1::SessionUp staged;
  staged.set_request_id(4);
  staged.mutable_staged()->set_generation(joined_[0].generation() + 1);
  staged.mutable_staged()->add_items()->set_optimizer("dense");
  const uint64_t rejected = Rejected();
  const Outcome outcome = Run(
      {AttachUp("j", 0, joined_[0].generation(), joined_[0].session_id()), again, empty, staged});
  EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  std::vector<std::pair<uint64_t, int>> acks;
  for (const v1::SessionDown& down : outcome.down) {
    if (down.has_ack()) acks.emplace_back(down.ack().request_id(), down.ack().code());
  }
  EXPECT_THAT(acks,
              ::testing::ElementsAre(
                  std::make_pair(1u, 0),
                  std::make_pair(2u, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT)),
                  std::make_pair(3u, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT)),
                  std::make_pair(4u, static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION))));
  EXPECT_EQ(Rejected(), rejected + 3);
}

// Bytes that do not parse after the attach end the stream with INVALID_ARGUMENT (not OK), counted
// by the attached rank's job; the rank is detached, nothing else changes.
TEST_F(SessionContractTest, LaterMessageThatDoesNotParseEndsTheSessionWithInvalidArgument) {
  JoinBoth();
  const v1::JobStatus before = State(/*sessions_too=*/true);
  const uint64_t rejected = Rejected();
  const Outcome outcome = RunRaw(
      {AttachUp("j", 0, joined_[0].generation(), joined_[0].session_id()).SerializeAsString(),
       kGarbage});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(outcome.status.error_message(),
            "the message does not parse as a psync.v1.SessionUp; the Session ends");
  ASSERT_EQ(outcome.down.size(), 1u);
  EXPECT_EQ(outcome.down[0].ack().request_id(), 1u);
  EXPECT_EQ(outcome.down[0].ack().code(), 0);
  EXPECT_EQ(Rejected(), rejected + 1);
  const v1::JobStatus after = State(/*sessions_too=*/true);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before, after))
      << "before:\n"
      << before.DebugString() << "after:\n"
      << after.DebugString();
}

// A rank whose connection was cut after a report was applied, before its Ack arrived, sends the
// report again once it is back. When the job has meanwhile moved past that step and the history
// window (1 step here) let it go, the report is a late repeat: answered OK, counted as a duplicate,
// nothing else changes. A step before the job's first step is still OUT_OF_RANGE.
class LateRepeatTest : public ServiceFixture {
 protected:
  void SetUp() override {
    server::CoordinatorOptions options;
    options.tracker.history_steps = 1;
    StartServer(std::move(options));
  }
};

TEST_F(LateRepeatTest, AReportSentAgainAfterTheWindowLetItGoIsAnsweredOk) {
  v1::JoinResponse joined[2];
  std::unique_ptr<RawSession> sessions[2];
  for (uint32_t r = 0; r < 2; ++r) {
    v1::JoinRequest request = MakeJoin("j", 2, r, 1);
    request.set_first_step(3);
    sessions[r] = JoinAndAttach(request, &joined[r]);
  }
  const uint64_t g = joined[0].generation();
  for (uint64_t step = 3; step < 7; ++step) {
    for (uint32_t r = 0; r < 2; ++r) ASSERT_TRUE(sessions[r]->Stage(g, step, 0, "dense").ok());
    for (uint32_t r = 0; r < 2; ++r) ASSERT_TRUE(sessions[r]->SyncDone(g, step, 0).ok());
  }
  const v1::JobStatus before = JobStatus("j");
  ASSERT_EQ(before.counters().checkins(), 8u);
  ASSERT_EQ(before.counters().duplicate_checkins(), 0u);
  // Rank 0 is at step 7; steps 3 and 4 are no longer held.
  EXPECT_TRUE(sessions[0]->Stage(g, 4, 0, "dense").ok());
  EXPECT_TRUE(sessions[0]->SyncDone(g, 3, 0).ok());
  const v1::JobStatus after = JobStatus("j");
  EXPECT_EQ(after.counters().checkins(), 8u);
  EXPECT_EQ(after.counters().duplicate_checkins(), 1u);
  EXPECT_EQ(after.counters().releases(), before.counters().releases());
  EXPECT_EQ(after.counters().syncs_done(), before.counters().syncs_done());
  EXPECT_EQ(after.counters().rejected(), 0u);
  // Step 2 is before the job's first step: never part of any rank's run.
  const grpc::Status before_run = sessions[0]->Stage(g, 2, 0, "dense");
  EXPECT_EQ(before_run.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(before_run.error_message(), "items[0].step 2 is before the oldest retained step 6");
}

}  // namespace
}  // namespace psync::testing
