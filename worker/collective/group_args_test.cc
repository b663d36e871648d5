#include "worker/collective/group_args.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "worker/collective/in_memory_kv_store.h"

namespace psync {
namespace worker {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(2);

TEST(ValidateGroupArgsTest, AcceptsValidArgs) {
  InMemoryKeyValueStore store;
  EXPECT_TRUE(ValidateGroupArgs("dp", 0, 1, &store, kTimeout).ok());
  EXPECT_TRUE(ValidateGroupArgs("ep_1-of-4.v2:pp0", 3, 4, &store, kTimeout).ok());
}

TEST(ValidateGroupArgsTest, RejectsBadArgsNamingTheField) {
  InMemoryKeyValueStore store;
  struct Case {
    std::string group;
    int rank;
    int size;
    KeyValueStore* store;
    absl::Duration timeout;
    std::string field;
  };
  const Case cases[] = {
      {"", 0, 1, &store, kTimeout, "group"},
      {"a/b", 0, 1, &store, kTimeout, "group"},
      {"a b", 0, 1, &store, kTimeout, "group"},
      {std::string(kMaxGroupNameLength + 1, 'a'), 0, 1, &store, kTimeout, "group"},
      {"g", 0, 0, &store, kTimeout, "size"},
      {"g", -1, 2, &store, kTimeout, "rank"},
      {"g", 2, 2, &store, kTimeout, "rank"},
      {"g", 0, 2, nullptr, kTimeout, "store"},
      {"g", 0, 2, &store, absl::ZeroDuration(), "timeout"},
      {"g", 0, 2, &store, absl::InfiniteDuration(), "timeout"},
  };
  for (const Case& c : cases) {
    absl::Status status = ValidateGroupArgs(c.group, c.rank, c.size, c.store, c.timeout);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field << " " << status;
    EXPECT_EQ(status.message().rfind(c.field + ":", 0), 0) << status;
  }
}

TEST(OperationArgsTest, AcceptsBuffersOfARepresentableSize) {
  char send[4] = {};
  char recv[8] = {};
  float fsend[8] = {};
  float frecv[4] = {};
  EXPECT_TRUE(CheckAllGatherArgs(send, recv, 4, 2).ok());
  EXPECT_TRUE(CheckReduceScatterArgs(fsend, frecv, 4, 2).ok());
}

TEST(OperationArgsTest, RejectsNullBuffersAndOverflowingSizes) {
  char buffer[4] = {};
  float floats[4] = {};
  EXPECT_TRUE(absl::IsInvalidArgument(CheckAllGatherArgs(nullptr, buffer, 1, 2)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckAllGatherArgs(buffer, nullptr, 1, 2)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckAllGatherArgs(buffer, buffer, SIZE_MAX / 2 + 1, 2)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckReduceScatterArgs(nullptr, floats, 1, 2)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckReduceScatterArgs(floats, nullptr, 1, 2)));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckReduceScatterArgs(floats, floats, SIZE_MAX / 8 + 1, 2)));
}

TEST(GroupKeyPrefixTest, SeparatesBackendsAndGroups) {
  EXPECT_EQ(GroupKeyPrefix("gloo", "dp"), "collective/gloo/dp/");
  EXPECT_NE(GroupKeyPrefix("gloo", "dp"), GroupKeyPrefix("nccl", "dp"));
  EXPECT_NE(GroupKeyPrefix("gloo", "ep0"), GroupKeyPrefix("gloo", "ep1"));
}

}  // namespace
}  // namespace worker
}  // namespace psync
