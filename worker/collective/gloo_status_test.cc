#include "worker/collective/gloo_status.h"

#include <exception>
#include <stdexcept>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gtest/gtest.h"

namespace psync {
namespace worker {
namespace {

template <typename E>
absl::Status StatusOf(E error) {
  return GlooExceptionToStatus("doing x", std::make_exception_ptr(error));
}

TEST(GlooStatusTest, StoreErrorKeepsItsCode) {
  absl::Status status = StatusOf(GlooStatusError(absl::DeadlineExceededError("key k")));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(), "doing x: key k");
}

TEST(GlooStatusTest, IoTimeoutIsDeadlineExceeded) {
  EXPECT_EQ(StatusOf(gloo::IoException("Timed out waiting 2000ms for recv operation")).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(StatusOf(gloo::IoException("Connect timeout [127.0.0.1]:4")).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(GlooStatusTest, OtherIoErrorIsUnavailable) {
  absl::Status status = StatusOf(gloo::IoException("Connection closed by peer [127.0.0.1]:5"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StartsWith(status.message(), "doing x: "));
  EXPECT_TRUE(absl::StrContains(status.message(), "closed by peer"));
}

TEST(GlooStatusTest, InternalChecksAreInternal) {
  EXPECT_EQ(StatusOf(gloo::EnforceNotMet("f.cc", 1, "a == b", "m")).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(StatusOf(gloo::InvalidOperationException("bad")).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(StatusOf(std::runtime_error("x")).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(StatusOf(42).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(GlooExceptionToStatus("x", nullptr).code(), absl::StatusCode::kInternal);
}

TEST(GlooStatusTest, RunGlooReturnsOkWithoutException) {
  bool ran = false;
  EXPECT_TRUE(RunGloo("x", [&] { ran = true; }).ok());
  EXPECT_TRUE(ran);
  EXPECT_EQ(RunGloo("x", [] { throw gloo::IoException("reset"); }).code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace worker
}  // namespace psync
