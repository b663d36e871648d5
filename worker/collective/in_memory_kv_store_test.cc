#include "worker/collective/in_memory_kv_store.h"

#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace psync {
namespace worker {
namespace {

TEST(InMemoryKeyValueStoreTest, GetReturnsWhatSetStored) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("a", "1").ok());
  absl::StatusOr<std::string> value = store.Get("a");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "1");
}

TEST(InMemoryKeyValueStoreTest, ValuesAreBytes) {
  InMemoryKeyValueStore store;
  const std::string bytes("\0\xff\0x", 4);
  ASSERT_TRUE(store.Set("k", bytes).ok());
  EXPECT_EQ(*store.Get("k"), bytes);
}

TEST(InMemoryKeyValueStoreTest, SetReplaces) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("a", "1").ok());
  ASSERT_TRUE(store.Set("a", "2").ok());
  EXPECT_EQ(*store.Get("a"), "2");
  EXPECT_EQ(store.size(), 1);
}

TEST(InMemoryKeyValueStoreTest, GetMissingIsNotFound) {
  InMemoryKeyValueStore store;
  EXPECT_EQ(store.Get("missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(InMemoryKeyValueStoreTest, WaitForPresentKeysReturnsAtOnce) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("a", "").ok());
  ASSERT_TRUE(store.Set("b", "").ok());
  EXPECT_TRUE(store.Wait({"a", "b"}, absl::ZeroDuration()).ok());
  EXPECT_TRUE(store.Wait({}, absl::ZeroDuration()).ok());
}

TEST(InMemoryKeyValueStoreTest, WaitTimesOutNamingMissingKeys) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("present", "").ok());
  absl::Status status = store.Wait({"present", "absent"}, absl::Milliseconds(10));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("absent"), absl::string_view::npos);
  EXPECT_EQ(status.message().find("present"), absl::string_view::npos);
}

TEST(InMemoryKeyValueStoreTest, WaitWakesOnSet) {
  InMemoryKeyValueStore store;
  absl::Notification waiting;
  absl::Status wait_status = absl::UnknownError("not run");
  std::thread waiter([&] {
    waiting.Notify();
    wait_status = store.Wait({"a", "b"}, absl::InfiniteDuration());
  });
  waiting.WaitForNotification();
  ASSERT_TRUE(store.Set("a", "1").ok());
  ASSERT_TRUE(store.Set("b", "2").ok());
  waiter.join();
  EXPECT_TRUE(wait_status.ok()) << wait_status;
}

TEST(InMemoryKeyValueStoreTest, ManyWaitersAllWake) {
  InMemoryKeyValueStore store;
  constexpr int kWaiters = 8;
  std::vector<absl::Status> statuses(kWaiters, absl::UnknownError("not run"));
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back(
        [&store, &statuses, i] { statuses[i] = store.Wait({"go"}, absl::InfiniteDuration()); });
  }
  ASSERT_TRUE(store.Set("go", "").ok());
  for (std::thread& t : waiters) t.join();
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace worker
}  // namespace psync
