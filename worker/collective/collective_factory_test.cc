#include "worker/collective/collective_factory.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "worker/collective/in_memory_kv_store.h"
#include "worker/collective/nccl_backend.h"

namespace psync {
namespace worker {
namespace {

TEST(MakeCollectiveFactoryTest, GlooFormsAWorkingGroup) {
  CollectiveBackendOptions options;
  options.gloo_interface = "lo";
  auto factory = MakeCollectiveFactory("gloo", options);
  ASSERT_TRUE(factory.ok()) << factory.status();
  EXPECT_EQ((*factory)->backend(), "gloo");

  InMemoryKeyValueStore store;
  std::vector<absl::Status> statuses(2);
  std::vector<int> gathered(2 * 2, -1);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      auto collective = (*factory)->Create("dp", rank, 2, &store, absl::Seconds(20));
      if (!collective.ok()) {
        statuses[rank] = collective.status();
        return;
      }
      const int send = 10 + rank;
      statuses[rank] = (*collective)->AllGather(&send, &gathered[rank * 2], sizeof(int));
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const absl::Status& status : statuses) {
    EXPECT_TRUE(status.ok()) << status;
  }
  EXPECT_EQ(gathered, (std::vector<int>{10, 11, 10, 11}));
}

TEST(MakeCollectiveFactoryTest, NcclIsThereOnlyWithCuda) {
  auto factory = MakeCollectiveFactory("nccl");
  if (NcclBackendBuiltIn()) {
    ASSERT_TRUE(factory.ok()) << factory.status();
    EXPECT_EQ((*factory)->backend(), "nccl");
  } else {
    EXPECT_EQ(factory.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_TRUE(absl::StrContains(factory.status().message(), "--config=cuda"));
  }
}

TEST(MakeCollectiveFactoryTest, UnknownBackendIsInvalid) {
  for (const std::string name : {"", "mpi", "GLOO", "nccl "}) {
    auto factory = MakeCollectiveFactory(name);
    EXPECT_EQ(factory.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_TRUE(absl::StartsWith(factory.status().message(), "backend:"));
  }
}

}  // namespace
}  // namespace worker
}  // namespace psync
