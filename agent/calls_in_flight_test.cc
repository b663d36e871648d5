#include "agent/calls_in_flight.h"

#include <thread>
#include <utility>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace psync::agent {
namespace {

TEST(CallsInFlightTest, CountsTokensUntilDestroyed) {
  CallsInFlight calls;
  EXPECT_EQ(calls.count(), 0);
  {
    CallsInFlight::Token a = calls.Enter();
    {
      CallsInFlight::Token b = calls.Enter();
      EXPECT_EQ(calls.count(), 2);
    }
    EXPECT_EQ(calls.count(), 1);
  }
  EXPECT_EQ(calls.count(), 0);
}

TEST(CallsInFlightTest, AMovedTokenIsReleasedOnce) {
  CallsInFlight calls;
  {
    CallsInFlight::Token first = calls.Enter();
    CallsInFlight::Token second = std::move(first);
    EXPECT_EQ(calls.count(), 1);
  }
  EXPECT_EQ(calls.count(), 0);
}

TEST(CallsInFlightTest, AwaitNoneWithNoTokenReturns) {
  CallsInFlight calls;
  calls.AwaitNone();
  EXPECT_EQ(calls.count(), 0);
}

// What a reactor did before its token went is seen by the thread that waited for none: the order
// Agent::Drain relies on before destroying the Router (checked by ThreadSanitizer under
// --config=tsan: `seen` is a plain variable).
TEST(CallsInFlightTest, AwaitNoneReturnsAfterTheLastTokenAndSeesItsWrites) {
  CallsInFlight calls;
  int seen = 0;
  absl::Notification holding;
  absl::Notification let_go;
  std::thread reactor([&, token = calls.Enter()]() mutable {
    holding.Notify();
    let_go.WaitForNotification();
    seen = 42;
    CallsInFlight::Token released = std::move(token);
  });
  holding.WaitForNotification();
  EXPECT_EQ(calls.count(), 1);
  let_go.Notify();
  calls.AwaitNone();
  EXPECT_EQ(seen, 42);
  EXPECT_EQ(calls.count(), 0);
  reactor.join();
}

}  // namespace
}  // namespace psync::agent
