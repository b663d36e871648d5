// Every status reaches the wire with its code's number and its message unchanged (up to
// kMaxEchoedBytes; longer ones are cut by BoundEcho), in each of the forms psync.v1 carries it,
// and comes back equal.
#include "wire/wire_status.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "wire/not_served.h"

namespace psync::wire {
namespace {

std::vector<absl::StatusCode> AllCodes() {
  std::vector<absl::StatusCode> codes;
  for (int c = 0; c <= 16; ++c) codes.push_back(static_cast<absl::StatusCode>(c));
  return codes;
}

TEST(BoundEchoTest, ShortTextIsUnchanged) {
  EXPECT_EQ(BoundEcho(""), "");
  EXPECT_EQ(BoundEcho("job 'a' not found"), "job 'a' not found");
  const std::string exactly(kMaxEchoedBytes, 'x');
  EXPECT_EQ(BoundEcho(exactly), exactly);
}

TEST(BoundEchoTest, LongTextIsCutWithAMarkerWithinTheBound) {
  const std::string text(1 << 20, 'x');
  const std::string cut = BoundEcho(text);
  EXPECT_LE(cut.size(), kMaxEchoedBytes);
  EXPECT_GT(cut.size(), kMaxEchoedBytes - 32);
  const size_t kept = cut.find("...(");
  ASSERT_NE(kept, std::string::npos);
  EXPECT_EQ(cut.substr(kept), absl::StrCat("...(", text.size() - kept, " more bytes)"));
  // The marker is sized for the longest count, so a shorter count leaves a byte or two unused.
  EXPECT_LE(BoundEcho(std::string(100, 'y'), 40).size(), 40u);
  EXPECT_GE(BoundEcho(std::string(100, 'y'), 40).size(), 38u);
}

TEST(BoundEchoTest, NeverCutsAUtf8Character) {
  std::string text;
  for (int i = 0; i < 600; ++i) text += "\xc3\xa9";  // é, two bytes each
  for (size_t max : {size_t{64}, size_t{65}, size_t{1024}}) {
    const std::string cut = BoundEcho(text, max);
    const size_t kept = cut.find("...(");
    ASSERT_NE(kept, std::string::npos);
    EXPECT_EQ(kept % 2, 0u) << max;
    EXPECT_LE(cut.size(), max);
  }
}

TEST(BoundEchoTest, TheViewIsAPrefixThatKeepsCharactersWhole) {
  EXPECT_EQ(BoundEchoView("short"), "short");
  const std::string text(5000, 'z');
  EXPECT_EQ(BoundEchoView(text), absl::string_view(text).substr(0, kMaxEchoedBytes));
  std::string accents;
  for (int i = 0; i < 10; ++i) accents += "\xc3\xa9";
  EXPECT_EQ(BoundEchoView(accents, 5).size(), 4u);
}

TEST(BoundEchoTest, StatusesOnTheWireAreBounded) {
  const absl::Status long_status =
      absl::NotFoundError(absl::StrCat("job '", std::string(1 << 20, 'j'), "' not found"));
  const v1::SessionDown down = AckFor(1, long_status);
  EXPECT_LE(down.ack().message().size(), kMaxEchoedBytes);
  EXPECT_EQ(down.ack().code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_LE(ToGrpcStatus(long_status).error_message().size(), kMaxEchoedBytes);
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

// A redirect with no owner (nobody may serve the job now) is still told apart from no redirect on
// the wire: its details are never empty bytes.
TEST(ToGrpcStatusTest, ARedirectWithNoOwnerIsStillARedirect) {
  const grpc::Status none = ToGrpcStatus(NotServedHere("nobody may serve it now", "", 0));
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(none.error_details().empty());
  const std::optional<v1::OwnerRedirect> redirect = OwnerRedirectOf(none);
  ASSERT_TRUE(redirect.has_value());
  EXPECT_EQ(redirect->owner(), "");
  EXPECT_TRUE(redirect->no_owner());
  const std::optional<v1::OwnerRedirect> named =
      OwnerRedirectOf(ToGrpcStatus(NotServedHere("go to b", "b:1", 9)));
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->owner(), "b:1");
  EXPECT_EQ(named->epoch(), 9u);
  EXPECT_FALSE(named->no_owner());
  EXPECT_FALSE(OwnerRedirectOf(ToGrpcStatus(absl::UnavailableError("plain"))).has_value());
}

}  // namespace
}  // namespace psync::wire
