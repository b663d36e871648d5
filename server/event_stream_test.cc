// WatchQueue: a watcher's events in index order, each once, even when live events reach the sink
// before registration returned (the replayed ones among them are dropped); bounded by count and
// bytes, after which it is empty and takes nothing more.
#include "server/event_stream.h"

#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::server {
namespace {

using ::testing::ElementsAre;

core::Event Ev(uint64_t index, std::string job = "j", std::string detail = "") {
  core::Event e;
  e.index = index;
  e.kind = core::EventKind::kRelease;
  e.job_id = std::move(job);
  e.detail = std::move(detail);
  return e;
}

std::vector<uint64_t> Drain(WatchQueue& q) {
  std::vector<uint64_t> out;
  while (!q.empty()) {
    out.push_back(q.front().index);
    q.pop_front();
  }
  return out;
}

TEST(WatchQueueTest, EventsDeliveredBeforeRegistrationReturnedAreQueuedOnce) {
  WatchQueue q("", {}, 0);
  // Events 3 and 4 were recorded before the watcher registered, so they are in its backlog, but
  // their fan-out reached the new sink too, before AddEventSink returned first_live = 5; event 5
  // is the first live one.
  q.AddLive({Ev(3), Ev(4)});
  q.AddLive({Ev(5)});
  EXPECT_TRUE(q.empty());  // held until Start
  q.Start(5, {Ev(1), Ev(2), Ev(3), Ev(4)});
  q.AddLive({Ev(4), Ev(6)});  // a late fan-out of 4 again: dropped
  EXPECT_THAT(Drain(q), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(WatchQueueTest, WithoutReplayOnlyLiveEvents) {
  WatchQueue q("", {}, 0);
  q.AddLive({Ev(3)});
  q.Start(4, {});
  q.AddLive({Ev(4)});
  EXPECT_THAT(Drain(q), ElementsAre(4));
}

TEST(WatchQueueTest, FiltersByJobAndKind) {
  WatchQueue q("a", {"release"}, 0);
  core::Event other_kind = Ev(2, "a");
  other_kind.kind = core::EventKind::kCheckin;
  q.Start(0, {Ev(1, "a"), other_kind, Ev(3, "b")});
  EXPECT_THAT(Drain(q), ElementsAre(1));
}

TEST(WatchQueueTest, OverTheByteBoundItOverflowsAndTakesNothingMore) {
  const size_t one = WatchQueue::EventBytes(Ev(0, "j", std::string(1000, 'x')));
  WatchQueue q("", {}, 3 * one);
  q.Start(0, {});
  q.AddLive({Ev(1, "j", std::string(1000, 'x')), Ev(2, "j", std::string(1000, 'x'))});
  q.pop_front();  // the watcher took event 1
  q.AddLive({Ev(3, "j", std::string(1000, 'x')), Ev(4, "j", std::string(1000, 'x'))});
  EXPECT_FALSE(q.overflowed());
  EXPECT_EQ(q.bytes(), 3 * one);
  q.AddLive({Ev(5, "j", std::string(1000, 'x'))});
  EXPECT_TRUE(q.overflowed());
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.bytes(), 0u);
  EXPECT_TRUE(absl::StrContains(q.OverflowMessage(), "skip events up to index 1"))
      << q.OverflowMessage();
  q.AddLive({Ev(6)});
  EXPECT_TRUE(q.empty());
}

TEST(WatchQueueTest, OverTheCountBoundItOverflows) {
  WatchQueue q("", {}, 0, /*max_events=*/2);
  q.Start(0, {Ev(1), Ev(2)});
  EXPECT_FALSE(q.overflowed());
  q.AddLive({Ev(3)});
  EXPECT_TRUE(q.overflowed());
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace psync::server
