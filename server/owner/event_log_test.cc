#include "server/owner/event_log.h"

#include <vector>

#include "gtest/gtest.h"

namespace psync::server {
namespace {

std::vector<core::Event> Events(int n, core::EventKind kind = core::EventKind::kCheckin) {
  std::vector<core::Event> events(n);
  for (core::Event& e : events) e.kind = kind;
  return events;
}

std::vector<uint64_t> Indices(const std::vector<core::Event>& events) {
  std::vector<uint64_t> out;
  for (const core::Event& e : events) out.push_back(e.index);
  return out;
}

TEST(EventLogTest, NumbersEventsInAppendOrderAndSharesTheBatch) {
  EventLog log(100);
  EventLog::Batch first = log.Append(Events(3));
  EventLog::Batch second = log.Append(Events(2));
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(Indices(*first), (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(Indices(*second), (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(log.first_index(), 0u);
  EXPECT_EQ(log.end_index(), 5u);
  EXPECT_EQ(log.Append({}), nullptr);
  EXPECT_EQ(log.end_index(), 5u);
}

TEST(EventLogTest, SinceReturnsEventsFromAnIndexAcrossBatches) {
  EventLog log(100);
  log.Append(Events(3));
  log.Append(Events(2));
  log.Append(Events(4));
  EXPECT_EQ(Indices(log.Since(0)), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(Indices(log.Since(4)), (std::vector<uint64_t>{4, 5, 6, 7, 8}));
  EXPECT_EQ(Indices(log.Since(9)), std::vector<uint64_t>{});
}

TEST(EventLogTest, SinceStopsAtTheLimit) {
  EventLog log(100);
  log.Append(Events(3));
  log.Append(Events(2));
  log.Append(Events(4));
  EXPECT_EQ(Indices(log.Since(1, 3)), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(Indices(log.Since(4, 1)), (std::vector<uint64_t>{4}));
  EXPECT_EQ(Indices(log.Since(7, 5)), (std::vector<uint64_t>{7, 8}));
  EXPECT_EQ(Indices(log.Since(0, 0)), std::vector<uint64_t>{});
}

TEST(EventLogTest, DropsOldestWholeBatchesBeyondCapacity) {
  EventLog log(5);
  log.Append(Events(3));  // 0..2
  log.Append(Events(2));  // 3..4: exactly at capacity
  EXPECT_EQ(log.first_index(), 0u);
  log.Append(Events(1, core::EventKind::kRelease));  // 5: over, the first batch goes
  EXPECT_EQ(log.first_index(), 3u);
  EXPECT_EQ(log.end_index(), 6u);
  EXPECT_EQ(Indices(log.Since(0)), (std::vector<uint64_t>{3, 4, 5}));
  std::vector<core::EventKind> kinds;
  log.ForEach([&](const core::Event& e) { kinds.push_back(e.kind); });
  EXPECT_EQ(kinds,
            (std::vector<core::EventKind>{core::EventKind::kCheckin, core::EventKind::kCheckin,
                                          core::EventKind::kRelease}));
}

// A merged check-in of 4 ranks takes one index but weighs 4 against the capacity, so the capacity
// bounds memory as with one event per rank.
TEST(EventLogTest, AMergedEventTakesOneIndexAndWeighsItsRanks) {
  EventLog log(6);
  std::vector<core::Event> merged = Events(1);
  merged[0].ranks = {0, 1, 2, 3};
  std::vector<core::Event> one = Events(1, core::EventKind::kSyncDone);
  one[0].rank = 5;
  log.Append(merged);                                // index 0, weight 4
  log.Append(one);                                   // index 1, weight 5 in all
  log.Append(Events(1, core::EventKind::kRelease));  // index 2, weight 6: at capacity
  EXPECT_EQ(log.first_index(), 0u);
  EXPECT_EQ(log.end_index(), 3u);
  log.Append(one);  // index 3, weight 7: the merged event goes, and it alone
  EXPECT_EQ(log.first_index(), 1u);
  EXPECT_EQ(Indices(log.Since(0)), (std::vector<uint64_t>{1, 2, 3}));
}

TEST(EventLogTest, ABatchLargerThanCapacityIsNumberedButNotKept) {
  EventLog log(2);
  EventLog::Batch big = log.Append(Events(4));
  EXPECT_EQ(Indices(*big), (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(log.first_index(), 4u);
  EXPECT_EQ(log.end_index(), 4u);
  EXPECT_TRUE(log.Since(0).empty());
}

}  // namespace
}  // namespace psync::server
