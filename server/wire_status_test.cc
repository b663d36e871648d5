// Every status reaches the wire with its code's number and its message unchanged, in each of the
// forms psync.v1 carries it, and comes back equal.
#include "server/wire_status.h"

#include <vector>

#include "gtest/gtest.h"

namespace psync::server {
namespace {

std::vector<absl::StatusCode> AllCodes() {
  std::vector<absl::StatusCode> codes;
  for (int c = 0; c <= 16; ++c) codes.push_back(static_cast<absl::StatusCode>(c));
  return codes;
}

TEST(AckForTest, OkIsCodeZeroWithNoMessage) {
  const v1::SessionDown down = AckFor(42, absl::OkStatus());
  ASSERT_TRUE(down.has_ack());
  EXPECT_EQ(down.ack().request_id(), 42u);
  EXPECT_EQ(down.ack().code(), 0);
  EXPECT_EQ(down.ack().message(), "");
  // The same bytes as an Ack that only names its request.
  v1::SessionDown bare;
  bare.mutable_ack()->set_request_id(42);
  EXPECT_EQ(down.SerializeAsString(), bare.SerializeAsString());
}

TEST(AckForTest, ErrorCarriesCodeNumberAndMessage) {
  const v1::SessionDown down =
      AckFor(7, absl::FailedPreconditionError("generation 1 is stale: job 'j' is at generation 2"));
  EXPECT_EQ(down.ack().request_id(), 7u);
  EXPECT_EQ(down.ack().code(), 9);
  EXPECT_EQ(down.ack().message(), "generation 1 is stale: job 'j' is at generation 2");
}

TEST(SetWireStatusTest, EveryFormEveryCodeRoundTrips) {
  for (absl::StatusCode code : AllCodes()) {
    const absl::Status status =
        code == absl::StatusCode::kOk ? absl::OkStatus() : absl::Status(code, "the reason");
    v1::Ack ack;
    v1::AgentAck agent_ack;
    v1::MessageStatus message_status;
    v1::AgentRankClosed closed;
    SetWireStatus(status, &ack);
    SetWireStatus(status, &agent_ack);
    SetWireStatus(status, &message_status);
    SetWireStatus(status, &closed);
    const int number = static_cast<int>(code);
    EXPECT_EQ(ack.code(), number);
    EXPECT_EQ(agent_ack.code(), number);
    EXPECT_EQ(message_status.code(), number);
    EXPECT_EQ(closed.code(), number);
    EXPECT_EQ(ack.message(), status.message());
    EXPECT_EQ(StatusFromWire(ack), status);
    EXPECT_EQ(StatusFromWire(agent_ack), status);
    EXPECT_EQ(StatusFromWire(message_status), status);
    EXPECT_EQ(StatusFromWire(closed), status);
  }
}

TEST(SetWireStatusTest, LeavesOtherFieldsAlone) {
  v1::AgentRankClosed closed;
  closed.set_job_id("job");
  closed.set_rank(3);
  closed.set_attach_request_id(11);
  SetWireStatus(absl::AbortedError("superseded"), &closed);
  EXPECT_EQ(closed.job_id(), "job");
  EXPECT_EQ(closed.rank(), 3u);
  EXPECT_EQ(closed.attach_request_id(), 11u);
  EXPECT_EQ(closed.code(), 10);
  EXPECT_EQ(closed.message(), "superseded");
}

TEST(ToGrpcStatusTest, SameNumberSameMessage) {
  for (absl::StatusCode code : AllCodes()) {
    const absl::Status status =
        code == absl::StatusCode::kOk ? absl::OkStatus() : absl::Status(code, "why");
    const grpc::Status g = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(g.error_code()), static_cast<int>(code));
    EXPECT_EQ(g.error_message(), code == absl::StatusCode::kOk ? "" : "why");
  }
}

}  // namespace
}  // namespace psync::server
