#include "worker/model_layout.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace psync {
namespace worker {
namespace {

TEST(BufferLayoutTest, PadsEveryShardToWholeMxfp8Blocks) {
  const BufferLayout layout(1000, 3, 4, ParamDtype::kMxfp8);
  // ceil(1000 / 3) = 334, rounded up to a multiple of 32 * 4 = 128.
  EXPECT_EQ(layout.bucket_elements(), 384);
  EXPECT_EQ(layout.padded_elements(), 1152);
  EXPECT_EQ(layout.shard_bucket_elements(), 96);
  EXPECT_EQ(layout.shard_elements(), 288);
  EXPECT_EQ(layout.staged_shard_bytes(), 96 + 3);  // elements + one scale per block
  EXPECT_EQ(layout.buffer_bytes(), 4 * 1152);
}

TEST(BufferLayoutTest, NoPaddingWhenSizesAlreadyFit) {
  const BufferLayout layout(4096, 2, 4, ParamDtype::kBf16);
  EXPECT_EQ(layout.bucket_elements(), 2048);
  EXPECT_EQ(layout.padded_elements(), 4096);
  EXPECT_EQ(layout.shard_bucket_elements(), 512);
  EXPECT_EQ(layout.staged_shard_bytes(), 1024);
}

TEST(BufferLayoutTest, StagedRegionsFitInsideEachBucketWithoutOverlap) {
  for (ParamDtype dtype : {ParamDtype::kBf16, ParamDtype::kMxfp8}) {
    for (int group : {1, 2, 3, 4, 8, 16}) {
      for (int buckets : {1, 2, 5}) {
        for (int64_t real : {1, 31, 32, 1000, 4096, 100003}) {
          const BufferLayout l(real, buckets, group, dtype);
          SCOPED_TRACE(testing::Message() << "dtype " << ParamDtypeName(dtype) << " group " << group
                                          << " buckets " << buckets << " real " << real);
          EXPECT_GE(l.padded_elements(), real);
          EXPECT_EQ(l.shard_bucket_elements() % kMxfp8BlockSize, 0);
          EXPECT_EQ(l.bucket_elements(), l.shard_bucket_elements() * group);
          for (int b = 0; b < buckets; ++b) {
            // The gather output ends where the send region starts; the send region ends inside
            // the bucket.
            EXPECT_EQ(l.gather_offset_bytes(b) + l.gather_bytes(), l.send_offset_bytes(b));
            EXPECT_LE(l.send_offset_bytes(b) + l.staged_shard_bytes(),
                      l.bucket_offset_bytes(b) + 4 * l.bucket_elements());
            // bf16 codes are 2-byte aligned (MXFP8 regions need no alignment).
            if (dtype == ParamDtype::kBf16) {
              EXPECT_EQ(l.send_offset_bytes(b) % 2, 0);
              EXPECT_EQ(l.gathered_shard_offset_bytes(b, group - 1) % 2, 0);
            }
          }
          EXPECT_EQ(l.ElementOf(buckets - 1, group - 1, l.shard_bucket_elements() - 1),
                    l.padded_elements() - 1);
          EXPECT_EQ(l.ShardIndexOf(buckets - 1, l.shard_bucket_elements() - 1),
                    l.shard_elements() - 1);
        }
      }
    }
  }
}

ModelConfig Config(int world, int rank, int experts) {
  ModelConfig c;
  c.world_size = world;
  c.rank = rank;
  c.expert_parallel = experts;
  return c;
}

TEST(ModelConfigTest, GroupsFollowTheExpertParallelLayout) {
  const ModelConfig c = Config(4, 3, 2);
  ASSERT_TRUE(c.Validate().ok());
  EXPECT_EQ(c.ep_rank(), 1);
  EXPECT_EQ(c.GroupName(ParamKind::kDense), "dp");
  EXPECT_EQ(c.GroupName(ParamKind::kExpert), "edp1");
  EXPECT_EQ(c.GroupMembers(ParamKind::kDense), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(c.GroupMembers(ParamKind::kExpert), (std::vector<int>{1, 3}));
  EXPECT_EQ(c.GroupSize(ParamKind::kExpert), 2);
  EXPECT_EQ(c.GroupRank(ParamKind::kExpert), 1);
  EXPECT_EQ(c.GroupRank(ParamKind::kDense), 3);
}

TEST(ModelConfigTest, ValidateNamesTheBadField) {
  EXPECT_TRUE(Config(4, 0, 2).Validate().ok());
  EXPECT_NE(Config(4, 0, 3).Validate().message().find("expert-parallel"), std::string::npos);
  EXPECT_NE(Config(4, 4, 1).Validate().message().find("rank"), std::string::npos);
  EXPECT_NE(Config(0, 0, 1).Validate().message().find("world size"), std::string::npos);
  ModelConfig c = Config(2, 0, 1);
  c.buckets = 0;
  EXPECT_NE(c.Validate().message().find("buckets"), std::string::npos);
  c = Config(2, 0, 1);
  c.dense_elements = 0;
  EXPECT_NE(c.Validate().message().find("dense"), std::string::npos);
  c = Config(2, 0, 1);
  c.num_chunks = 0;
  EXPECT_NE(c.Validate().message().find("chunks"), std::string::npos);
}

TEST(ModelConfigTest, JoinPlanDeclaresBothOptimizersAndBothGroupsPerChunk) {
  ModelConfig c = Config(4, 2, 2);
  c.num_chunks = 3;
  const psync::v1::JoinRequest r = c.JoinRequestFor("job");
  EXPECT_EQ(r.job_id(), "job");
  EXPECT_EQ(r.world_size(), 4u);
  EXPECT_EQ(r.rank(), 2u);
  EXPECT_EQ(r.num_chunks(), 3u);
  ASSERT_EQ(r.chunks_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const psync::v1::ChunkPlan& chunk = r.chunks(i);
    EXPECT_EQ(chunk.chunk(), static_cast<uint32_t>(i));
    ASSERT_EQ(chunk.optimizers_size(), 2);
    EXPECT_EQ(chunk.optimizers(0), "dense");
    EXPECT_EQ(chunk.optimizers(1), "expert");
    ASSERT_EQ(chunk.groups_size(), 2);
    EXPECT_EQ(chunk.groups(0).name(), "dp");
    EXPECT_EQ(chunk.groups(0).ranks_size(), 4);
    EXPECT_EQ(chunk.groups(1).name(), "edp0");
    ASSERT_EQ(chunk.groups(1).ranks_size(), 2);
    EXPECT_EQ(chunk.groups(1).ranks(0), 0u);
    EXPECT_EQ(chunk.groups(1).ranks(1), 2u);
  }
}

}  // namespace
}  // namespace worker
}  // namespace psync
