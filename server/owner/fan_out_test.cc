// FanOut: every index is covered exactly once, by as many slices as there are threads but none
// shorter than the minimum, and with helpers the slices run on more than one thread.
#include "server/owner/fan_out.h"

#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace psync::server {
namespace {

struct Slices {
  absl::Mutex mu;
  std::vector<std::pair<size_t, size_t>> ranges;
  absl::flat_hash_set<std::thread::id> threads;
};

void Record(Slices& s, size_t begin, size_t end) {
  absl::MutexLock lock(&s.mu);
  s.ranges.emplace_back(begin, end);
  s.threads.insert(std::this_thread::get_id());
}

std::vector<int> Coverage(const Slices& s, size_t n) {
  std::vector<int> hits(n, 0);
  for (const auto& [begin, end] : s.ranges) {
    for (size_t i = begin; i < end; ++i) ++hits[i];
  }
  return hits;
}

TEST(FanOutTest, SplitsIntoOneSlicePerThreadCoveringEveryIndexOnce) {
  FanOut fan_out(3);
  Slices s;
  fan_out.Run(130, 16, [&](size_t b, size_t e) { Record(s, b, e); });
  ASSERT_EQ(s.ranges.size(), 4u);
  EXPECT_EQ(Coverage(s, 130), std::vector<int>(130, 1));
  for (const auto& [begin, end] : s.ranges) EXPECT_GE(end - begin, 32u);
}

TEST(FanOutTest, NoSliceIsShorterThanTheMinimum) {
  FanOut fan_out(3);
  Slices s;
  fan_out.Run(40, 16, [&](size_t b, size_t e) { Record(s, b, e); });
  ASSERT_EQ(s.ranges.size(), 2u);  // 40 / 16: two slices of 20, not four of 10
  EXPECT_EQ(Coverage(s, 40), std::vector<int>(40, 1));
}

TEST(FanOutTest, SmallWorkAndNoHelpersRunOnTheCallersThread) {
  for (auto [helpers, n] : {std::pair<int, size_t>{3, 15}, {0, 1000}}) {
    FanOut fan_out(helpers);
    Slices s;
    fan_out.Run(n, 16, [&](size_t b, size_t e) { Record(s, b, e); });
    ASSERT_EQ(s.ranges.size(), 1u) << helpers;
    EXPECT_EQ(s.ranges[0], std::make_pair(size_t{0}, n));
    EXPECT_TRUE(s.threads.contains(std::this_thread::get_id()));
  }
  FanOut fan_out(3);
  bool called = false;
  fan_out.Run(0, 16, [&](size_t, size_t) { called = true; });
  EXPECT_FALSE(called);
}

TEST(FanOutTest, SlicesRunAtOnceOnSeveralThreads) {
  // Every slice waits (at most 10 s) until all four have started: they all see four only if they
  // run concurrently.
  FanOut fan_out(3);
  absl::Mutex mu;
  int started = 0;
  int saw_all = 0;
  Slices s;
  fan_out.Run(64, 16, [&](size_t b, size_t e) {
    absl::MutexLock lock(&mu);
    ++started;
    if (mu.AwaitWithTimeout(absl::Condition(
                                +[](int* n) { return *n == 4; }, &started),
                            absl::Seconds(10))) {
      ++saw_all;
    }
    s.threads.insert(std::this_thread::get_id());
    s.ranges.emplace_back(b, e);
  });
  EXPECT_EQ(saw_all, 4);
  EXPECT_EQ(s.threads.size(), 4u);
  EXPECT_EQ(Coverage(s, 64), std::vector<int>(64, 1));
}

}  // namespace
}  // namespace psync::server
