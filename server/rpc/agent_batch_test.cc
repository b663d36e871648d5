// ExpandAgentBatch refuses malformed batches precisely; AgentDownQueue merges notices for several
// ranks without reordering any rank's notices.
#include "server/rpc/agent_batch.h"

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serve/agent_down_queue.h"

namespace psync::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::AgentBatch TwoMessages() {
  v1::AgentBatch b;
  b.set_job_id("job");
  b.set_generation(1);
  b.add_ranks(0);
  b.add_ranks(1);
  return b;
}

absl::Status Expand(const v1::AgentBatch& b) {
  ExpandedBatch expanded;
  absl::Status s = ExpandAgentBatch(b, &expanded);
  EXPECT_EQ(s.ok(), !expanded.messages.empty());
  return s;
}

TEST(ExpandAgentBatchTest, RefusesMalformedBatches) {
  v1::AgentBatch b = TwoMessages();
  b.clear_job_id();
  EXPECT_THAT(Expand(b).message(), HasSubstr("batch.job_id"));

  b = TwoMessages();
  b.clear_ranks();
  EXPECT_EQ(Expand(b).code(), absl::StatusCode::kInvalidArgument);

  b = TwoMessages();
  b.add_staged()->add_messages(2);
  EXPECT_EQ(Expand(b).message(), "batch.staged[0].messages[0]: 2 is out of range [0, 2)");

  b = TwoMessages();
  v1::MergedStaged* m = b.add_staged();
  m->add_messages(1);
  m->add_messages(1);
  EXPECT_THAT(Expand(b).message(),
              HasSubstr("batch.staged[0].messages[1]: 1 must be above the previous index 1"));

  b = TwoMessages();
  b.add_staged();
  EXPECT_THAT(Expand(b).message(), HasSubstr("messages must not be empty"));

  b = TwoMessages();
  b.add_staged()->add_messages(0);
  b.add_skips()->set_message(0);
  EXPECT_THAT(Expand(b).message(),
              HasSubstr("batch.skips[0].message: message 0 is already named in staged"));

  b = TwoMessages();
  b.add_sync_dones()->set_message(1);
  b.add_sync_dones()->set_message(1);
  EXPECT_THAT(Expand(b).message(),
              HasSubstr("batch.sync_dones[1].message: message 1 is already named in sync_dones"));

  b = TwoMessages();
  b.add_merged_sync_dones();
  EXPECT_EQ(Expand(b).message(), "batch.merged_sync_dones[0].messages must not be empty");

  b = TwoMessages();
  b.add_merged_sync_dones()->add_messages(2);
  EXPECT_EQ(Expand(b).message(),
            "batch.merged_sync_dones[0].messages[0]: 2 is out of range [0, 2)");

  b = TwoMessages();
  v1::MergedSyncDone* d = b.add_merged_sync_dones();
  d->add_messages(1);
  d->add_messages(0);
  EXPECT_EQ(Expand(b).message(),
            "batch.merged_sync_dones[0].messages[1]: 0 must be above the previous index 1");

  b = TwoMessages();
  b.add_sync_dones()->set_message(0);
  b.add_merged_sync_dones()->add_messages(0);
  EXPECT_EQ(Expand(b).message(),
            "batch.merged_sync_dones[0].messages[0]: message 0 is already named in sync_dones; a "
            "message has one kind");

  b = TwoMessages();
  b.add_merged_sync_dones()->add_messages(1);
  b.add_leaves()->set_message(1);
  EXPECT_EQ(Expand(b).message(),
            "batch.leaves[0].message: message 1 is already named in merged_sync_dones; a message "
            "has one kind");
}

// A merged SyncDone expands to the same messages as the per-message form.
TEST(ExpandAgentBatchTest, MergedSyncDonesExpandAsEachMessagesOwn) {
  v1::SyncDone done;
  done.set_step(4);
  done.set_chunk(2);
  done.set_executions(0);  // read as 1
  v1::GroupChecksum* c = done.add_checksums();
  c->set_group("dp0");
  c->set_checksum(99);
  v1::AgentBatch b = TwoMessages();
  b.add_ranks(7);
  b.add_staged()->add_messages(1);
  b.mutable_staged(0)->set_step(5);
  v1::MergedSyncDone* merged = b.add_merged_sync_dones();
  *merged->add_items() = done;
  done.set_chunk(3);
  *merged->add_items() = done;
  merged->add_messages(0);
  merged->add_messages(2);
  ExpandedBatch expanded;
  ASSERT_TRUE(ExpandAgentBatch(b, &expanded).ok());
  ASSERT_EQ(expanded.messages.size(), 3u);
  EXPECT_EQ(expanded.messages[1].kind, RankMessage::Kind::kStaged);
  for (size_t i : {0, 2}) {
    const RankMessage& m = expanded.messages[i];
    EXPECT_EQ(m.rank, i == 0 ? 0u : 7u);
    ASSERT_EQ(m.kind, RankMessage::Kind::kSyncDone);
    ASSERT_EQ(m.sync_done.size(), 2u);
    EXPECT_EQ(m.sync_done[0].step, 4u);
    EXPECT_EQ(m.sync_done[0].chunk, 2u);
    EXPECT_EQ(m.sync_done[1].chunk, 3u);
    EXPECT_EQ(m.sync_done[1].executions, 1u);
    ASSERT_EQ(m.sync_done[1].checksums.size(), 1u);
    EXPECT_EQ(m.sync_done[1].checksums[0].group, "dp0");
    EXPECT_EQ(m.sync_done[1].checksums[0].checksum, 99u);
  }
  // One copy of the items, seen by both messages.
  EXPECT_EQ(expanded.sync_done_items.size(), 2u);
}

// Messages carrying only an entry's item view its one copy; a message carrying several items
// gets its own run, in the order of the entries.
TEST(ExpandAgentBatchTest, OneItemMessagesOfAnEntryViewOneCopy) {
  v1::AgentBatch b = TwoMessages();
  b.add_ranks(5);
  v1::MergedStaged* dense = b.add_staged();
  dense->set_step(3);
  dense->set_optimizer("dense");
  for (uint32_t m : {0u, 1u, 2u}) dense->add_messages(m);
  v1::MergedStaged* expert = b.add_staged();
  expert->set_step(3);
  expert->set_optimizer("expert");
  expert->set_shard_checksum(8);
  expert->add_messages(1);
  ExpandedBatch expanded;
  ASSERT_TRUE(ExpandAgentBatch(b, &expanded).ok());
  ASSERT_EQ(expanded.messages.size(), 3u);
  const RankMessage& first = expanded.messages[0];
  const RankMessage& both = expanded.messages[1];
  const RankMessage& last = expanded.messages[2];
  ASSERT_EQ(first.staged.size(), 1u);
  ASSERT_EQ(last.staged.size(), 1u);
  EXPECT_EQ(first.staged.data(), last.staged.data());
  EXPECT_EQ(last.rank, 5u);
  EXPECT_EQ(last.staged[0].optimizer, "dense");
  EXPECT_EQ(last.staged[0].step, 3u);
  EXPECT_FALSE(last.staged[0].checksum.has_value());
  ASSERT_EQ(both.staged.size(), 2u);
  EXPECT_NE(both.staged.data(), first.staged.data());
  EXPECT_EQ(both.staged[0].optimizer, "dense");
  EXPECT_EQ(both.staged[1].optimizer, "expert");
  EXPECT_EQ(both.staged[1].checksum, 8u);
  EXPECT_EQ(expanded.staged_items.size(), 4u);  // one per entry, then message 1's two
}

v1::SessionDown Directive(uint64_t step, uint32_t chunk) {
  v1::SessionDown d;
  d.mutable_directive()->set_generation(1);
  d.mutable_directive()->set_step(step);
  d.mutable_directive()->set_chunk(chunk);
  return d;
}

TEST(AgentDownQueueTest, MergesEqualNoticesAndKeepsEachRanksOrder) {
  serve::AgentDownQueue q;
  q.AddNotice("job", 0, Directive(1, 0));
  q.AddNotice("job", 0, Directive(1, 1));
  q.AddNotice("job", 1, Directive(1, 0));    // merges into the first entry
  q.AddNotice("job", 1, Directive(1, 1));    // merges into the second
  q.AddNotice("other", 1, Directive(1, 1));  // another job: its own entry
  q.AddNotice("job", 2, Directive(1, 1));
  q.AddNotice("job", 2, Directive(1, 0));  // rank 2 has a later notice: a new entry
  v1::AgentAck ack;
  ack.set_request_id(7);
  q.AddAck(ack);
  ASSERT_EQ(q.size(), 1u);
  const v1::AgentDown down = q.Take();
  EXPECT_TRUE(q.empty());
  ASSERT_EQ(down.notices_size(), 4);
  EXPECT_THAT(down.notices(0).ranks(), ElementsAre(0, 1));
  EXPECT_EQ(down.notices(0).notice().directive().chunk(), 0u);
  EXPECT_THAT(down.notices(1).ranks(), ElementsAre(0, 1, 2));
  EXPECT_EQ(down.notices(1).notice().directive().chunk(), 1u);
  EXPECT_EQ(down.notices(2).job_id(), "other");
  EXPECT_THAT(down.notices(3).ranks(), ElementsAre(2));
  EXPECT_EQ(down.notices(3).notice().directive().chunk(), 0u);
  ASSERT_EQ(down.acks_size(), 1);
  EXPECT_EQ(down.acks(0).request_id(), 7u);
}

TEST(AgentDownQueueTest, OpensANewMessageWhenFull) {
  serve::AgentDownQueue q;
  for (size_t i = 0; i < serve::AgentDownQueue::kMaxItems + 1; ++i) q.AddAck(v1::AgentAck());
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.Take().acks_size(), static_cast<int>(serve::AgentDownQueue::kMaxItems));
  EXPECT_EQ(q.Take().acks_size(), 1);
}

TEST(AgentDownQueueTest, ManyRanksAtOnceFillMessagesAsOneAtATimeWould) {
  // Three items short of full: two ranks fit, the third opens the next message.
  serve::AgentDownQueue at_once;
  serve::AgentDownQueue one_by_one;
  for (size_t i = 0; i + 3 < serve::AgentDownQueue::kMaxItems; ++i) {
    at_once.AddAck(v1::AgentAck());
    one_by_one.AddAck(v1::AgentAck());
  }
  const v1::SessionDown notice = Directive(4, 2);
  const std::string key = serve::AgentDownQueue::NoticeKey("job", notice);
  const std::vector<core::RankId> ranks = {0, 1, 2, 3, 4};
  at_once.AddNotice("job", ranks, notice, key);
  for (core::RankId r : ranks) one_by_one.AddNotice("job", r, notice);
  ASSERT_EQ(at_once.size(), 2u);
  ASSERT_EQ(one_by_one.size(), 2u);
  const v1::AgentDown first = at_once.Take();
  const v1::AgentDown second = at_once.Take();
  ASSERT_EQ(first.notices_size(), 1);
  EXPECT_THAT(first.notices(0).ranks(), ElementsAre(0, 1));
  ASSERT_EQ(second.notices_size(), 1);
  EXPECT_THAT(second.notices(0).ranks(), ElementsAre(2, 3, 4));
  EXPECT_EQ(second.notices(0).notice().directive().chunk(), 2u);
  EXPECT_EQ(first.SerializeAsString(), one_by_one.Take().SerializeAsString());
  EXPECT_EQ(second.SerializeAsString(), one_by_one.Take().SerializeAsString());
}

// A release of more ranks than two messages hold, after other notices, goes into the newest
// entries in bulk: byte for byte the messages the ranks added one by one make.
TEST(AgentDownQueueTest, AReleaseOfMoreRanksThanAMessageHoldsMatchesOneByOne) {
  serve::AgentDownQueue at_once;
  serve::AgentDownQueue one_by_one;
  for (serve::AgentDownQueue* q : {&at_once, &one_by_one}) {
    q->AddAck(v1::AgentAck());
    q->AddNotice("job", 7, Directive(3, 0));
  }
  std::vector<core::RankId> ranks;
  for (core::RankId r = 0; r < 2 * serve::AgentDownQueue::kMaxItems + 100; ++r) ranks.push_back(r);
  const v1::SessionDown notice = Directive(3, 1);
  at_once.AddNotice("job", ranks, notice, serve::AgentDownQueue::NoticeKey("job", notice));
  for (core::RankId r : ranks) one_by_one.AddNotice("job", r, notice);
  EXPECT_EQ(at_once.bytes(), one_by_one.bytes());
  ASSERT_EQ(at_once.size(), 3u);
  ASSERT_EQ(one_by_one.size(), 3u);
  int ranks_sent = 0;
  while (!at_once.empty()) {
    const v1::AgentDown down = at_once.Take();
    for (const v1::AgentNotice& n : down.notices()) {
      if (n.notice().directive().chunk() == 1) ranks_sent += n.ranks_size();
    }
    EXPECT_EQ(down.SerializeAsString(), one_by_one.Take().SerializeAsString());
  }
  EXPECT_EQ(ranks_sent, static_cast<int>(ranks.size()));
}

TEST(AgentDownQueueTest, ManyRanksAtOnceKeepEachRanksOrder) {
  serve::AgentDownQueue q;
  q.AddNotice("job", 0, Directive(1, 0));
  q.AddNotice("job", 1, Directive(1, 1));
  // Rank 1 already has a later notice than the entry of (1, 0): from rank 1 on, a new entry.
  const v1::SessionDown notice = Directive(1, 0);
  const std::vector<core::RankId> ranks = {2, 1, 3};
  q.AddNotice("job", ranks, notice, serve::AgentDownQueue::NoticeKey("job", notice));
  const v1::AgentDown down = q.Take();
  ASSERT_EQ(down.notices_size(), 3);
  EXPECT_THAT(down.notices(0).ranks(), ElementsAre(0, 2));
  EXPECT_THAT(down.notices(1).ranks(), ElementsAre(1));
  EXPECT_THAT(down.notices(2).ranks(), ElementsAre(1, 3));
  EXPECT_EQ(down.notices(2).notice().directive().chunk(), 0u);
}

TEST(AgentDownQueueTest, RanksJoinedWithoutALookupAreIndexedForALaterMergeIntoAnOlderEntry) {
  serve::AgentDownQueue q;
  const v1::SessionDown a = Directive(1, 0);
  const v1::SessionDown b = Directive(1, 1);
  q.AddNotice("job", 0, a);
  q.AddNotice("job", 0, b);
  // Rank 1 joins the older entry of `a`; rank 0, which has `b` after it, opens a new one, which
  // rank 2 then joins as its newest.
  const std::vector<core::RankId> ranks = {1, 0, 2};
  q.AddNotice("job", ranks, a, serve::AgentDownQueue::NoticeKey("job", a));
  q.AddNotice("job", 1, b);  // rank 1's last notice is `a` in entry 0: joins entry 1
  q.AddNotice("job", 2, b);  // rank 2 has `a` in entry 2, after entry 1: a new entry
  const v1::AgentDown down = q.Take();
  ASSERT_EQ(down.notices_size(), 4);
  EXPECT_THAT(down.notices(0).ranks(), ElementsAre(0, 1));
  EXPECT_THAT(down.notices(1).ranks(), ElementsAre(0, 1));
  EXPECT_THAT(down.notices(2).ranks(), ElementsAre(0, 2));
  EXPECT_THAT(down.notices(3).ranks(), ElementsAre(2));
  EXPECT_EQ(down.notices(3).notice().directive().chunk(), 1u);
}

// Random notices to random ranks of two jobs, one or several ranks at a time: reading the
// messages' entries in order gives every (job, rank) exactly the notices it was given, in order.
TEST(AgentDownQueueTest, EveryRankGetsItsNoticesInOrderWhateverTheMerges) {
  std::mt19937 random(7);
  for (int round = 0; round < 200; ++round) {
    serve::AgentDownQueue q;
    std::map<std::pair<std::string, uint32_t>, std::vector<std::string>> given;
    for (int call = 0; call < 40; ++call) {
      const std::string job = random() % 4 == 0 ? "other" : "job";
      const v1::SessionDown notice = Directive(1, random() % 3);
      std::vector<core::RankId> ranks;
      for (int n = 1 + static_cast<int>(random() % 4); n > 0; --n) ranks.push_back(random() % 6);
      q.AddNotice(job, ranks, notice, serve::AgentDownQueue::NoticeKey(job, notice));
      for (core::RankId r : ranks) given[{job, r}].push_back(notice.SerializeAsString());
    }
    std::map<std::pair<std::string, uint32_t>, std::vector<std::string>> received;
    while (!q.empty()) {
      const v1::AgentDown down = q.Take();
      for (const v1::AgentNotice& n : down.notices()) {
        for (uint32_t r : n.ranks()) {
          received[{n.job_id(), r}].push_back(n.notice().SerializeAsString());
        }
      }
    }
    ASSERT_EQ(received, given) << "round " << round;
  }
}

}  // namespace
}  // namespace psync::server
