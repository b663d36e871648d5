// Endpoints: which coordinator replica a client uses after failures and redirects.
#include "client/endpoints.h"

#include "gtest/gtest.h"

namespace psync {
namespace {

std::shared_ptr<grpc::Channel> Lazy(const std::string& target) {
  // Channels connect lazily: no server is needed to hand out stubs.
  return grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
}

absl::Status RedirectTo(const std::string& owner, uint64_t epoch) {
  psync::v1::OwnerRedirect r;
  r.set_owner(owner);
  r.set_epoch(epoch);
  absl::Status s = absl::UnavailableError("job 'j' is owned by replica '" + owner + "'");
  s.SetPayload("type.googleapis.com/psync.v1.OwnerRedirect", absl::Cord(r.SerializeAsString()));
  return s;
}

TEST(SplitTargetsTest, CommaSeparatedWithBlanks) {
  EXPECT_EQ(*SplitTargets(" a:1, b:2,,c:3 ", "target"),
            (std::vector<std::string>{"a:1", "b:2", "c:3"}));
  const absl::StatusOr<std::vector<std::string>> none = SplitTargets(" , ", "options.target");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(none.status().message(),
            "options.target must name at least one target (host:port[,host:port...])");
}

TEST(EndpointsTest, FailuresRotateAlongTheListFromTheStart) {
  Endpoints e({"a:1", "b:1", "c:1"}, Lazy, /*start=*/4);
  std::string target;
  ASSERT_NE(e.Stub(&target), nullptr);
  EXPECT_EQ(target, "b:1");
  EXPECT_TRUE(e.OnFailure("b:1", absl::UnavailableError("connection refused")));
  EXPECT_EQ(e.current(), "c:1");
  // A failure reported for a target no longer current (a late report) changes nothing.
  EXPECT_FALSE(e.OnFailure("b:1", absl::UnavailableError("late")));
  EXPECT_EQ(e.current(), "c:1");
  EXPECT_TRUE(e.OnFailure("c:1", absl::UnavailableError("x")));
  EXPECT_EQ(e.current(), "a:1");
  EXPECT_EQ(e.rotations(), 2u);
  EXPECT_EQ(e.redirects(), 0u);
}

TEST(EndpointsTest, RedirectGoesToTheOwnerAndAFailingOwnerBackToTheList) {
  Endpoints e({"a:1", "b:1"}, Lazy);
  EXPECT_TRUE(e.OnFailure("a:1", RedirectTo("z:9", 7)));
  EXPECT_EQ(e.current(), "z:9");  // not on the list: followed anyway
  std::string target;
  e.Stub(&target);
  EXPECT_EQ(target, "z:9");
  EXPECT_EQ(e.redirects(), 1u);
  // The owner dies: back to the list entry after the one that redirected.
  EXPECT_TRUE(e.OnFailure("z:9", absl::UnavailableError("connection refused")));
  EXPECT_EQ(e.current(), "a:1");
  // A redirect without an owner (nobody may serve the job now) moves along the list.
  EXPECT_TRUE(e.OnFailure("a:1", RedirectTo("", 0)));
  EXPECT_EQ(e.current(), "b:1");
  // A redirect to the current target itself is a plain failure.
  EXPECT_TRUE(e.OnFailure("b:1", RedirectTo("b:1", 3)));
  EXPECT_EQ(e.current(), "a:1");
}

TEST(EndpointsTest, ASingleTargetNeverMovesButFollowsRedirects) {
  Endpoints e({"a:1"}, Lazy);
  EXPECT_FALSE(e.OnFailure("a:1", absl::UnavailableError("down")));
  EXPECT_EQ(e.current(), "a:1");
  EXPECT_TRUE(e.OnFailure("a:1", RedirectTo("b:1", 2)));
  EXPECT_EQ(e.current(), "b:1");
  EXPECT_TRUE(e.OnFailure("b:1", absl::UnavailableError("down")));
  EXPECT_EQ(e.current(), "a:1");
}

TEST(EndpointsTest, AFixedChannelNeverMoves) {
  Endpoints e(Lazy("a:1"));
  EXPECT_NE(e.Stub(), nullptr);
  EXPECT_FALSE(e.OnFailure("", RedirectTo("b:1", 2)));
  EXPECT_EQ(e.redirects(), 0u);
}

TEST(EndpointsTest, RedirectInReadsGrpcErrorDetails) {
  psync::v1::OwnerRedirect r;
  r.set_owner("b:1");
  r.set_epoch(42);
  const grpc::Status with(grpc::StatusCode::UNAVAILABLE, "moved", r.SerializeAsString());
  ASSERT_TRUE(RedirectIn(with).has_value());
  EXPECT_EQ(RedirectIn(with)->owner(), "b:1");
  EXPECT_EQ(RedirectIn(with)->epoch(), 42u);
  EXPECT_FALSE(RedirectIn(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")).has_value());
  EXPECT_FALSE(RedirectIn(absl::UnavailableError("down")).has_value());
}

}  // namespace
}  // namespace psync
