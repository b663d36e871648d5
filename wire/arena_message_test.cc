// ArenaMessage: a stream whose messages outgrow the arena's first block parses its usual message
// without allocating once the block has grown, and the block grows no further than kLargestBlock.
#include "wire/arena_message.h"

#include <string>

#include "gtest/gtest.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace psync::wire {
namespace {

using Batch = ArenaMessage<v1::AgentBatch>;

// An AgentBatch of `ranks` messages, one check-in entry naming them all.
std::string BatchOf(int ranks) {
  v1::AgentBatch batch;
  batch.set_job_id("job");
  v1::MergedStaged* staged = batch.add_staged();
  staged->set_optimizer("dense");
  for (int i = 0; i < ranks; ++i) {
    batch.add_ranks(static_cast<uint32_t>(i));
    staged->add_messages(static_cast<uint32_t>(i));
  }
  return batch.SerializeAsString();
}

TEST(ArenaMessageTest, LargeMessagesParseWithoutAllocatingOnceTheFirstBlockGrew) {
  const std::string large = BatchOf(5000);
  Batch m;
  EXPECT_EQ(m.first_block_size(), Batch::kInitialBlock);
  ASSERT_TRUE(m->ParseFromString(large));
  const size_t needed = m.space_allocated();
  ASSERT_GT(needed, Batch::kInitialBlock);  // blocks beyond the first

  EXPECT_EQ(m.Renew()->ranks_size(), 0);
  EXPECT_GE(m.first_block_size(), needed);
  EXPECT_LT(m.first_block_size(), 2 * needed);
  const size_t grown = m.first_block_size();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(m->ParseFromString(large));
    EXPECT_EQ(m->ranks_size(), 5000);
    EXPECT_EQ(m->staged(0).messages_size(), 5000);
    EXPECT_EQ(m.space_allocated(), grown) << "a block beyond the first";
    m.Renew();
  }
  // A small message keeps the block as it is.
  ASSERT_TRUE(m->ParseFromString(BatchOf(3)));
  EXPECT_EQ(m.Renew()->ranks_size(), 0);
  EXPECT_EQ(m.first_block_size(), grown);
}

TEST(ArenaMessageTest, TheFirstBlockGrowsNoFurtherThanTheLargest) {
  const std::string huge = BatchOf(200000);
  Batch m;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(m->ParseFromString(huge));
    EXPECT_EQ(m->ranks_size(), 200000);
    EXPECT_GT(m.space_allocated(), Batch::kLargestBlock);
    m.Renew();
    EXPECT_EQ(m.first_block_size(), Batch::kLargestBlock);
  }
}

}  // namespace
}  // namespace psync::wire
