#include "sim/sim_plan.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace psync::sim {
namespace {

std::vector<uint32_t> Ranks(const psync::v1::SyncGroup& g) {
  return std::vector<uint32_t>(g.ranks().begin(), g.ranks().end());
}

TEST(SimPlanTest, EveryChunkDenseAndExpertByDefault) {
  SimPlan plan;
  plan.world_size = 8;
  plan.num_chunks = 2;
  plan.expert_parallel = 4;
  ASSERT_TRUE(plan.Validate().ok());
  const psync::v1::JoinRequest r = plan.JoinRequestFor(5, "job", 100);
  EXPECT_EQ(r.job_id(), "job");
  EXPECT_EQ(r.world_size(), 8u);
  EXPECT_EQ(r.rank(), 5u);
  EXPECT_EQ(r.num_chunks(), 2u);
  EXPECT_EQ(r.first_step(), 100u);
  EXPECT_TRUE(r.incarnation().empty());
  ASSERT_EQ(r.chunks_size(), 2);
  for (int c = 0; c < 2; ++c) {
    const psync::v1::ChunkPlan& chunk = r.chunks(c);
    EXPECT_EQ(chunk.chunk(), static_cast<uint32_t>(c));
    EXPECT_EQ(std::vector<std::string>(chunk.optimizers().begin(), chunk.optimizers().end()),
              (std::vector<std::string>{"dense", "expert"}));
    ASSERT_EQ(chunk.groups_size(), 2);
    EXPECT_EQ(chunk.groups(0).name(), "dp");
    EXPECT_EQ(Ranks(chunk.groups(0)), (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
    // 5 % 4 == 1: the expert DP group of EP rank 1 has W / E = 2 ranks.
    EXPECT_EQ(chunk.groups(1).name(), "edp1");
    EXPECT_EQ(Ranks(chunk.groups(1)), (std::vector<uint32_t>{1, 5}));
  }
  EXPECT_EQ(plan.GroupsOf(5, 0), (std::vector<std::string>{"dp", "edp1"}));
  EXPECT_EQ(plan.Contributors(0).size(), 16u);
  EXPECT_EQ(plan.Members(1).size(), 8u);
  EXPECT_EQ(plan.MemberChunks(3), (std::vector<uint32_t>{0, 1}));
}

TEST(SimPlanTest, ExpertGroupsPartitionTheRanks) {
  SimPlan plan;
  plan.world_size = 64;
  plan.num_chunks = 1;
  plan.expert_parallel = 8;
  std::vector<int> seen(64, 0);
  for (uint32_t r = 0; r < 64; ++r) {
    const psync::v1::JoinRequest request = plan.JoinRequestFor(r, "j", 0);
    const psync::v1::SyncGroup& edp = request.chunks(0).groups(1);
    EXPECT_EQ(edp.name(), "edp" + std::to_string(r % 8));
    ASSERT_EQ(edp.ranks_size(), 8);
    for (uint32_t m : edp.ranks()) {
      EXPECT_EQ(m % 8, r % 8);
      if (m == r) ++seen[r];
    }
  }
  for (int r = 0; r < 64; ++r) EXPECT_EQ(seen[r], 1) << r;
}

TEST(SimPlanTest, DenseOnlyExpertOnlyAndEmptyChunks) {
  SimPlan plan;
  plan.world_size = 4;
  plan.num_chunks = 4;
  plan.expert_parallel = 2;
  plan.dense_chunks = std::set<uint32_t>{0, 1};
  plan.expert_chunks = std::set<uint32_t>{1, 2};
  ASSERT_TRUE(plan.Validate().ok());
  const psync::v1::JoinRequest r = plan.JoinRequestFor(3, "j", 0);
  ASSERT_EQ(r.chunks_size(), 3);  // chunk 3 has no parameters: not listed

  EXPECT_EQ(r.chunks(0).chunk(), 0u);
  EXPECT_EQ(
      std::vector<std::string>(r.chunks(0).optimizers().begin(), r.chunks(0).optimizers().end()),
      (std::vector<std::string>{"dense"}));
  ASSERT_EQ(r.chunks(0).groups_size(), 1);
  EXPECT_EQ(r.chunks(0).groups(0).name(), "dp");

  EXPECT_EQ(r.chunks(1).optimizers_size(), 2);
  EXPECT_EQ(r.chunks(1).groups_size(), 2);

  EXPECT_EQ(r.chunks(2).chunk(), 2u);
  EXPECT_EQ(
      std::vector<std::string>(r.chunks(2).optimizers().begin(), r.chunks(2).optimizers().end()),
      (std::vector<std::string>{"expert"}));
  ASSERT_EQ(r.chunks(2).groups_size(), 1);
  EXPECT_EQ(r.chunks(2).groups(0).name(), "edp1");
  EXPECT_EQ(Ranks(r.chunks(2).groups(0)), (std::vector<uint32_t>{1, 3}));

  EXPECT_TRUE(plan.Members(3).empty());
  EXPECT_TRUE(plan.Contributors(3).empty());
  EXPECT_EQ(plan.Members(2).size(), 4u);  // the expert groups cover every rank
  EXPECT_EQ(plan.MemberChunks(0), (std::vector<uint32_t>{0, 1, 2}));
}

TEST(SimPlanTest, ValidateNamesTheField) {
  SimPlan plan;
  plan.world_size = 6;
  plan.expert_parallel = 4;
  EXPECT_NE(plan.Validate().message().find("expert_parallel"), std::string::npos);
  plan.expert_parallel = 3;
  EXPECT_TRUE(plan.Validate().ok());
  plan.num_chunks = 2;
  plan.dense_chunks = std::set<uint32_t>{2};
  EXPECT_NE(plan.Validate().message().find("dense_chunks"), std::string::npos);
  plan.dense_chunks.reset();
  plan.expert_chunks = std::set<uint32_t>{5};
  EXPECT_NE(plan.Validate().message().find("expert_chunks"), std::string::npos);
  plan.expert_chunks.reset();
  plan.world_size = 0;
  EXPECT_EQ(plan.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SimPlanTest, ChecksumsAreDeterministicAndDistinct) {
  EXPECT_EQ(GroupChecksum(3, 1, "dp"), GroupChecksum(3, 1, "dp"));
  EXPECT_NE(GroupChecksum(3, 1, "dp"), GroupChecksum(3, 1, "edp0"));
  EXPECT_NE(GroupChecksum(3, 1, "dp"), GroupChecksum(4, 1, "dp"));
  EXPECT_NE(GroupChecksum(3, 1, "dp"), GroupChecksum(3, 2, "dp"));
  EXPECT_EQ(ShardChecksum(1, 2, 3, "dense"), ShardChecksum(1, 2, 3, "dense"));
  EXPECT_NE(ShardChecksum(1, 2, 3, "dense"), ShardChecksum(1, 2, 3, "expert"));
}

}  // namespace
}  // namespace psync::sim
