#include "agent/batch_parts.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::agent {
namespace {

using ::testing::ElementsAre;

// Ranks 10..13: messages 0 and 1 check in chunk 0, messages 1 and 3 chunk 1 (message 1 in that
// order), message 2 votes to skip.
v1::AgentBatch FourMessages() {
  v1::AgentBatch batch;
  batch.set_job_id("job");
  batch.set_generation(3);
  for (uint32_t r = 10; r < 14; ++r) batch.add_ranks(r);
  v1::MergedStaged* chunk0 = batch.add_staged();
  chunk0->set_step(5);
  chunk0->set_chunk(0);
  chunk0->set_optimizer("dense");
  chunk0->add_messages(0);
  chunk0->add_messages(1);
  v1::MergedStaged* chunk1 = batch.add_staged();
  chunk1->set_step(5);
  chunk1->set_chunk(1);
  chunk1->set_optimizer("expert");
  chunk1->set_shard_checksum(77);
  chunk1->add_messages(1);
  chunk1->add_messages(3);
  v1::IndexedSkip* skip = batch.add_skips();
  skip->set_message(2);
  skip->set_step(5);
  skip->set_reason("nan");
  return batch;
}

TEST(BatchPartsTest, KeptMessagesAreRenumberedInOrderWithTheirOwnEntries) {
  std::vector<uint32_t> index_of;
  const v1::AgentBatch kept = KeepMessages(FourMessages(), {true, false, true, true}, &index_of);
  EXPECT_EQ(kept.job_id(), "job");
  EXPECT_EQ(kept.generation(), 3u);
  EXPECT_THAT(kept.ranks(), ElementsAre(10u, 12u, 13u));
  EXPECT_THAT(index_of, ElementsAre(0u, 2u, 3u));
  ASSERT_EQ(kept.staged_size(), 2);
  EXPECT_EQ(kept.staged(0).chunk(), 0u);
  EXPECT_THAT(kept.staged(0).messages(), ElementsAre(0u));
  EXPECT_EQ(kept.staged(1).chunk(), 1u);
  EXPECT_EQ(kept.staged(1).optimizer(), "expert");
  EXPECT_EQ(kept.staged(1).step(), 5u);
  ASSERT_TRUE(kept.staged(1).has_shard_checksum());
  EXPECT_EQ(kept.staged(1).shard_checksum(), 77u);
  EXPECT_THAT(kept.staged(1).messages(), ElementsAre(2u));
  ASSERT_EQ(kept.skips_size(), 1);
  EXPECT_EQ(kept.skips(0).message(), 1u);
  EXPECT_EQ(kept.skips(0).reason(), "nan");
}

TEST(BatchPartsTest, EntriesLeftWithNoMessageAreDropped) {
  std::vector<uint32_t> index_of;
  const v1::AgentBatch kept = KeepMessages(FourMessages(), {false, false, true, false}, &index_of);
  EXPECT_THAT(kept.ranks(), ElementsAre(12u));
  EXPECT_THAT(index_of, ElementsAre(2u));
  EXPECT_EQ(kept.staged_size(), 0);
  ASSERT_EQ(kept.skips_size(), 1);
  EXPECT_EQ(kept.skips(0).message(), 0u);
}

// Ranks 10..13: messages 0, 2 and 3 report one SyncDone, message 1 another.
v1::AgentBatch FourSyncDones() {
  v1::AgentBatch batch;
  batch.set_job_id("job");
  batch.set_generation(3);
  for (uint32_t r = 10; r < 14; ++r) batch.add_ranks(r);
  v1::MergedSyncDone* shared = batch.add_merged_sync_dones();
  v1::SyncDone* done = shared->add_items();
  done->set_step(5);
  done->set_chunk(2);
  v1::GroupChecksum* c = done->add_checksums();
  c->set_group("dp");
  c->set_checksum(42);
  for (uint32_t m : {0u, 2u, 3u}) shared->add_messages(m);
  v1::MergedSyncDone* other = batch.add_merged_sync_dones();
  other->add_items()->set_chunk(7);
  other->add_messages(1);
  return batch;
}

TEST(BatchPartsTest, KeptMessagesKeepTheirMergedSyncDones) {
  std::vector<uint32_t> index_of;
  const v1::AgentBatch kept = KeepMessages(FourSyncDones(), {false, false, true, true}, &index_of);
  EXPECT_THAT(kept.ranks(), ElementsAre(12u, 13u));
  ASSERT_EQ(kept.merged_sync_dones_size(), 1);  // the entry of message 1 alone is dropped
  EXPECT_THAT(kept.merged_sync_dones(0).messages(), ElementsAre(0u, 1u));
  ASSERT_EQ(kept.merged_sync_dones(0).items_size(), 1);
  EXPECT_EQ(kept.merged_sync_dones(0).items(0).chunk(), 2u);
  EXPECT_EQ(kept.merged_sync_dones(0).items(0).checksums(0).checksum(), 42u);
}

TEST(BatchPartsTest, AppendedMergedSyncDonesMoveByThePartsOffset) {
  v1::AgentBatch merged = FourMessages();
  EXPECT_EQ(AppendBatch(FourSyncDones(), &merged), 4u);
  EXPECT_EQ(merged.ranks_size(), 8);
  ASSERT_EQ(merged.merged_sync_dones_size(), 2);
  EXPECT_THAT(merged.merged_sync_dones(0).messages(), ElementsAre(4u, 6u, 7u));
  EXPECT_THAT(merged.merged_sync_dones(1).messages(), ElementsAre(5u));
  EXPECT_EQ(merged.merged_sync_dones(1).items(0).chunk(), 7u);
}

}  // namespace
}  // namespace psync::agent
