#include "worker/collective/gloo_store_adapter.h"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo_status.h"
#include "worker/collective/in_memory_kv_store.h"

namespace psync {
namespace worker {
namespace {

std::vector<char> Bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

absl::Status ThrownStatus(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const GlooStatusError& e) {
    return e.status();
  }
  return absl::OkStatus();
}

TEST(GlooStoreAdapterTest, PrefixesKeys) {
  InMemoryKeyValueStore store;
  GlooStoreAdapter adapter(&store, "p/", absl::Seconds(1));
  adapter.set("0", Bytes(std::string("a\0b", 3)));
  EXPECT_EQ(*store.Get("p/0"), std::string("a\0b", 3));
  EXPECT_EQ(store.Get("0").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(adapter.get("0"), Bytes(std::string("a\0b", 3)));
}

TEST(GlooStoreAdapterTest, TwoPrefixesDoNotClash) {
  InMemoryKeyValueStore store;
  GlooStoreAdapter a(&store, "a/", absl::Seconds(1));
  GlooStoreAdapter b(&store, "b/", absl::Seconds(1));
  a.set("0", Bytes("from a"));
  b.set("0", Bytes("from b"));
  EXPECT_EQ(a.get("0"), Bytes("from a"));
  EXPECT_EQ(b.get("0"), Bytes("from b"));
}

TEST(GlooStoreAdapterTest, WaitSeesPrefixedKeys) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("p/1", "x").ok());
  GlooStoreAdapter adapter(&store, "p/", absl::Seconds(1));
  EXPECT_TRUE(ThrownStatus([&] { adapter.wait({"1"}, std::chrono::milliseconds(1)); }).ok());
}

TEST(GlooStoreAdapterTest, WaitTimeoutThrowsDeadlineExceeded) {
  InMemoryKeyValueStore store;
  GlooStoreAdapter adapter(&store, "p/", absl::Milliseconds(10));
  EXPECT_EQ(ThrownStatus([&] { adapter.wait({"1"}, std::chrono::milliseconds(10)); }).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ThrownStatus([&] { adapter.wait({"1"}); }).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ThrownStatus([&] { adapter.get("1"); }).code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace worker
}  // namespace psync
