#include "server/kv/rendezvous_store.h"

#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RendezvousStoreTest : public ::testing::Test {
 protected:
  RendezvousStoreTest()
      : store_(RendezvousLimits{.max_key_bytes = 8,
                                .max_value_bytes = 4,
                                .max_keys_per_job = 2,
                                .max_keys_per_get = 3},
               [this](const std::string& job, uint64_t generation, const RendezvousStore::Caller&) {
                 if (job != "j") return absl::NotFoundError("job_id 'x' is not known");
                 if (generation != generation_) return absl::FailedPreconditionError("stale");
                 return absl::OkStatus();
               }) {}

  // Runs Get and returns the result if it completed at once.
  std::optional<absl::StatusOr<RendezvousStore::Values>> GetNow(std::vector<std::string> keys,
                                                                bool wait = false) {
    std::optional<absl::StatusOr<RendezvousStore::Values>> result;
    store_.Get("j", generation_, {}, keys, wait, [&](auto r) { result = std::move(r); });
    return result;
  }

  uint64_t generation_ = 1;
  RendezvousStore store_;
};

TEST_F(RendezvousStoreTest, SetThenGet) {
  ASSERT_TRUE(store_.Set("j", 1, {}, "a", "1").ok());
  ASSERT_TRUE(store_.Set("j", 1, {}, "b", "22").ok());
  auto r = GetNow({"b", "a"});
  ASSERT_TRUE(r.has_value() && r->ok());
  EXPECT_THAT(**r, ElementsAre("22", "1"));
}

TEST_F(RendezvousStoreTest, MissingKeyWithoutWaitIsNotFound) {
  ASSERT_TRUE(store_.Set("j", 1, {}, "a", "1").ok());
  auto r = GetNow({"a", "zz"});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r->status().message(), HasSubstr("key 'zz' is not set"));
}

TEST_F(RendezvousStoreTest, WaitCompletesWhenTheLastKeyIsSet) {
  std::optional<absl::StatusOr<RendezvousStore::Values>> result;
  const uint64_t id =
      store_.Get("j", 1, {}, {"a", "b"}, true, [&](auto r) { result = std::move(r); });
  EXPECT_NE(id, 0u);
  ASSERT_TRUE(store_.Set("j", 1, {}, "a", "1").ok());
  EXPECT_FALSE(result.has_value()) << "still waiting for b";
  ASSERT_TRUE(store_.Set("j", 1, {}, "b", "2").ok());
  ASSERT_TRUE(result.has_value() && result->ok());
  EXPECT_THAT(**result, ElementsAre("1", "2"));
  store_.Cancel(id, absl::CancelledError("late"));  // no-op after completion
  EXPECT_TRUE(result->ok());
}

TEST_F(RendezvousStoreTest, CancelCompletesAParkedGet) {
  std::optional<absl::StatusOr<RendezvousStore::Values>> result;
  const uint64_t id = store_.Get("j", 1, {}, {"a"}, true, [&](auto r) { result = std::move(r); });
  store_.Cancel(id, absl::DeadlineExceededError("deadline"));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(store_.Set("j", 1, {}, "a", "1").ok());  // completes nothing twice
  EXPECT_EQ(result->status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(RendezvousStoreTest, BadInputIsRejectedAndStoresNothing) {
  EXPECT_EQ(store_.Set("j", 1, {}, "", "1").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store_.Set("j", 1, {}, "toolongkey", "1").message(), HasSubstr("key must be 1..8"));
  EXPECT_THAT(store_.Set("j", 1, {}, "a", "12345").message(), HasSubstr("value must be at most 4"));
  EXPECT_EQ(store_.Set("x", 1, {}, "a", "1").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_.Set("j", 2, {}, "a", "1").code(), absl::StatusCode::kFailedPrecondition);
  auto r = GetNow({"a"});
  EXPECT_EQ(r->status().code(), absl::StatusCode::kNotFound);
  auto too_many = GetNow({"a", "b", "c", "d"});
  EXPECT_EQ(too_many->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many->status().message(), HasSubstr("keys must have 1..3 entries (got 4)"));
}

TEST_F(RendezvousStoreTest, KeyLimitIsResourceExhausted) {
  ASSERT_TRUE(store_.Set("j", 1, {}, "a", "1").ok());
  ASSERT_TRUE(store_.Set("j", 1, {}, "b", "1").ok());
  EXPECT_EQ(store_.Set("j", 1, {}, "c", "1").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(store_.Set("j", 1, {}, "a", "2").ok()) << "replacing a key is not a new key";
}

TEST_F(RendezvousStoreTest, NewGenerationDropsOlderKeys) {
  ASSERT_TRUE(store_.Set("j", 1, {}, "a", "1").ok());
  generation_ = 2;
  ASSERT_TRUE(store_.Set("j", 2, {}, "b", "2").ok());
  EXPECT_EQ(GetNow({"a"})->status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(**GetNow({"b"}), ElementsAre("2"));
}

TEST_F(RendezvousStoreTest, DropJobFreesItsKeysAndCompletesItsParkedGets) {
  ASSERT_TRUE(store_.Set("j", 1, {}, "a", "1").ok());
  ASSERT_TRUE(store_.Set("j", 1, {}, "b", "2").ok());  // max_keys_per_job = 2: the job is full
  std::optional<absl::StatusOr<RendezvousStore::Values>> parked;
  store_.Get("j", 1, {}, {"c"}, /*wait=*/true, [&](auto r) { parked = std::move(r); });
  ASSERT_FALSE(parked.has_value());

  EXPECT_EQ(store_.DropJob("j", absl::FailedPreconditionError("job_id 'j' has ended: done")), 2u);
  ASSERT_TRUE(parked.has_value());
  EXPECT_EQ(parked->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(parked->status().message(), "job_id 'j' has ended: done");
  // Its keys are gone (and its room with them).
  EXPECT_EQ(GetNow({"a"})->status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_.Set("j", 1, {}, "x", "1").ok());
  EXPECT_TRUE(store_.Set("j", 1, {}, "y", "1").ok());
  EXPECT_EQ(store_.DropJob("other", absl::CancelledError("")), 0u);
}

}  // namespace
}  // namespace psync::server
