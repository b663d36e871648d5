// MergeMessages against the coordinator's ExpandAgentBatch: merging shares check-ins between
// ranks, and expanding restores every message exactly (kind, rank, items and their order). The
// same for a relay's concatenation of several agents' batches (agent/batch_parts.h), and its
// split of the coordinator's answer, and random nodes' messages through a relay.
#include "agent/merge.h"

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/batch_parts.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/rpc/agent_batch.h"
#include "wire/agent_batch_shape.h"

namespace psync::agent {
namespace {

v1::SessionUp Staged(std::vector<std::tuple<uint64_t, uint32_t, std::string>> items,
                     std::optional<uint64_t> checksum = std::nullopt) {
  v1::SessionUp up;
  up.mutable_staged()->set_generation(3);
  for (const auto& [step, chunk, optimizer] : items) {
    v1::Staged* s = up.mutable_staged()->add_items();
    s->set_step(step);
    s->set_chunk(chunk);
    s->set_optimizer(optimizer);
    if (checksum.has_value()) s->set_shard_checksum(*checksum);
  }
  return up;
}

std::vector<std::string> ItemsOf(const server::RankMessage& m) {
  std::vector<std::string> out;
  for (const core::StagedItem& i : m.staged) {
    out.push_back(absl::StrCat(i.step, "/", i.chunk, "/", i.optimizer,
                               i.checksum.has_value() ? absl::StrCat("#", *i.checksum) : ""));
  }
  return out;
}

TEST(MergeTest, EightRanksCheckingInOneChunkShareOneEntry) {
  std::vector<v1::SessionUp> ups;
  for (int r = 0; r < 8; ++r) ups.push_back(Staged({{5, 2, "dense"}}));
  std::vector<MergeInput> inputs;
  for (uint32_t r = 0; r < 8; ++r) inputs.push_back({r, &ups[r]});

  const v1::AgentBatch batch = MergeMessages("job", 3, inputs);
  EXPECT_EQ(batch.job_id(), "job");
  EXPECT_EQ(batch.generation(), 3u);
  ASSERT_EQ(batch.ranks_size(), 8);
  ASSERT_EQ(batch.staged_size(), 1);
  EXPECT_EQ(batch.staged(0).messages_size(), 8);

  server::ExpandedBatch expanded_batch;
  ASSERT_TRUE(server::ExpandAgentBatch(batch, &expanded_batch).ok());
  const std::vector<server::RankMessage>& expanded = expanded_batch.messages;
  ASSERT_EQ(expanded.size(), 8u);
  for (uint32_t r = 0; r < 8; ++r) {
    EXPECT_EQ(expanded[r].rank, r);
    EXPECT_EQ(expanded[r].kind, server::RankMessage::Kind::kStaged);
    EXPECT_EQ(ItemsOf(expanded[r]), std::vector<std::string>{"5/2/dense"});
  }
}

TEST(MergeTest, EachMessageKeepsItsItemsInOrder) {
  // Rank 0 sends (A, B), rank 1 (B, A), rank 2 (A, A): orders conflict, so some entries repeat.
  const v1::SessionUp a_b = Staged({{1, 0, "dense"}, {1, 0, "expert"}});
  const v1::SessionUp b_a = Staged({{1, 0, "expert"}, {1, 0, "dense"}});
  const v1::SessionUp a_a = Staged({{1, 0, "dense"}, {1, 0, "dense"}});
  const v1::SessionUp with_sum = Staged({{1, 0, "dense"}}, 77);
  const std::vector<MergeInput> inputs = {{0, &a_b}, {1, &b_a}, {2, &a_a}, {3, &with_sum}};

  const v1::AgentBatch batch = MergeMessages("job", 3, inputs);
  server::ExpandedBatch expanded_batch;
  ASSERT_TRUE(server::ExpandAgentBatch(batch, &expanded_batch).ok());
  const std::vector<server::RankMessage>& expanded = expanded_batch.messages;
  EXPECT_EQ(ItemsOf(expanded[0]), (std::vector<std::string>{"1/0/dense", "1/0/expert"}));
  EXPECT_EQ(ItemsOf(expanded[1]), (std::vector<std::string>{"1/0/expert", "1/0/dense"}));
  EXPECT_EQ(ItemsOf(expanded[2]), (std::vector<std::string>{"1/0/dense", "1/0/dense"}));
  EXPECT_EQ(ItemsOf(expanded[3]), (std::vector<std::string>{"1/0/dense#77"}));
  // dense(0), expert(0,1), dense(1,2), dense(2), dense#77(3).
  EXPECT_EQ(batch.staged_size(), 5);
}

TEST(MergeTest, SkipsAndSyncDonesOfOneRankStayPerMessage) {
  v1::SessionUp skip;
  skip.mutable_skip()->set_generation(3);
  skip.mutable_skip()->set_step(9);
  skip.mutable_skip()->set_reason("found_inf");
  v1::SessionUp done;
  done.mutable_sync_done()->set_generation(3);
  v1::SyncDone* d = done.mutable_sync_done()->add_items();
  d->set_step(8);
  d->set_chunk(1);
  d->set_executions(2);
  v1::GroupChecksum* c = d->add_checksums();
  c->set_group("dp");
  c->set_checksum(42);
  const v1::SessionUp empty = Staged({});
  const v1::SessionUp staged = Staged({{9, 1, "dense"}});
  const std::vector<MergeInput> inputs = {{4, &skip}, {5, &done}, {6, &empty}, {7, &staged}};

  const v1::AgentBatch batch = MergeMessages("job", 3, inputs);
  server::ExpandedBatch expanded_batch;
  ASSERT_TRUE(server::ExpandAgentBatch(batch, &expanded_batch).ok());
  const std::vector<server::RankMessage>& expanded = expanded_batch.messages;
  ASSERT_EQ(expanded.size(), 4u);
  const server::RankMessage& s = expanded[0];
  EXPECT_EQ(s.rank, 4u);
  EXPECT_EQ(s.kind, server::RankMessage::Kind::kSkip);
  EXPECT_EQ(s.skip_step, 9u);
  EXPECT_EQ(s.skip_reason, "found_inf");
  const server::RankMessage& sd = expanded[1];
  EXPECT_EQ(sd.kind, server::RankMessage::Kind::kSyncDone);
  ASSERT_EQ(sd.sync_done.size(), 1u);
  EXPECT_EQ(sd.sync_done[0].step, 8u);
  EXPECT_EQ(sd.sync_done[0].executions, 2u);
  ASSERT_EQ(sd.sync_done[0].checksums.size(), 1u);
  EXPECT_EQ(sd.sync_done[0].checksums[0].checksum, 42u);
  EXPECT_EQ(expanded[2].kind, server::RankMessage::Kind::kStaged);
  EXPECT_TRUE(expanded[2].staged.empty());
  EXPECT_EQ(ItemsOf(expanded[3]), std::vector<std::string>{"9/1/dense"});
}

v1::SessionUp SyncDoneUp(uint32_t chunk, uint64_t checksum) {
  v1::SessionUp up;
  up.mutable_sync_done()->set_generation(3);
  v1::SyncDone* d = up.mutable_sync_done()->add_items();
  d->set_step(8);
  d->set_chunk(chunk);
  v1::GroupChecksum* c = d->add_checksums();
  c->set_group("dp");
  c->set_checksum(checksum);
  return up;
}

TEST(MergeTest, EqualSyncDonesShareOneEntryAndExpandAsSent) {
  // Ranks 0, 2 and 3 report the same SyncDone; rank 1 another checksum, rank 4 another chunk,
  // rank 5 both chunks (a batch of two items), rank 6 checks in between.
  const v1::SessionUp same = SyncDoneUp(1, 42);
  const v1::SessionUp other_sum = SyncDoneUp(1, 43);
  const v1::SessionUp other_chunk = SyncDoneUp(2, 42);
  v1::SessionUp two = SyncDoneUp(1, 42);
  *two.mutable_sync_done()->add_items() = other_chunk.sync_done().items(0);
  const v1::SessionUp staged = Staged({{9, 1, "dense"}});
  const std::vector<MergeInput> inputs = {{0, &same},  {1, &other_sum},   {2, &same},
                                          {3, &same},  {4, &other_chunk}, {5, &two},
                                          {6, &staged}};

  const v1::AgentBatch merged = MergeMessages("job", 3, inputs);
  EXPECT_EQ(merged.sync_dones_size(), 0);
  ASSERT_EQ(merged.merged_sync_dones_size(), 4);
  EXPECT_THAT(merged.merged_sync_dones(0).messages(), testing::ElementsAre(0u, 2u, 3u));
  EXPECT_THAT(merged.merged_sync_dones(1).messages(), testing::ElementsAre(1u));
  EXPECT_THAT(merged.merged_sync_dones(2).messages(), testing::ElementsAre(4u));
  EXPECT_THAT(merged.merged_sync_dones(3).messages(), testing::ElementsAre(5u));

  // Per message (what a coordinator older than merged_sync_dones reads): the same messages.
  MergeOptions per_message_options;
  per_message_options.merge_sync_dones = false;
  const v1::AgentBatch per_message = MergeMessages("job", 3, inputs, per_message_options);
  EXPECT_EQ(per_message.merged_sync_dones_size(), 0);
  EXPECT_EQ(per_message.sync_dones_size(), 6);
  server::ExpandedBatch a;
  server::ExpandedBatch b;
  ASSERT_TRUE(server::ExpandAgentBatch(merged, &a).ok());
  ASSERT_TRUE(server::ExpandAgentBatch(per_message, &b).ok());
  ASSERT_EQ(a.messages.size(), 7u);
  ASSERT_EQ(b.messages.size(), 7u);
  for (size_t i = 0; i < 7; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a.messages[i].rank, b.messages[i].rank);
    ASSERT_EQ(a.messages[i].kind, b.messages[i].kind);
    ASSERT_EQ(a.messages[i].sync_done.size(), b.messages[i].sync_done.size());
    for (size_t k = 0; k < a.messages[i].sync_done.size(); ++k) {
      const core::SyncDoneItem& x = a.messages[i].sync_done[k];
      const core::SyncDoneItem& y = b.messages[i].sync_done[k];
      EXPECT_EQ(std::tie(x.step, x.chunk, x.executions), std::tie(y.step, y.chunk, y.executions));
      EXPECT_EQ(x.checksums, y.checksums);
    }
  }
  EXPECT_EQ(a.messages[1].sync_done[0].checksums[0].checksum, 43u);
  EXPECT_EQ(a.messages[5].sync_done[1].chunk, 2u);
  EXPECT_EQ(ItemsOf(a.messages[6]), std::vector<std::string>{"9/1/dense"});
}

TEST(MergeTest, LeavesStayPerMessageWithTheirFinishedFlag) {
  v1::SessionUp finished;
  finished.mutable_leave()->set_generation(3);
  finished.mutable_leave()->set_finished(true);
  v1::SessionUp leaving;
  leaving.mutable_leave()->set_generation(3);
  const v1::SessionUp staged = Staged({{9, 1, "dense"}});
  EXPECT_EQ(GenerationOf(finished), 3u);
  const std::vector<MergeInput> inputs = {{4, &staged}, {5, &finished}, {6, &leaving}};

  const v1::AgentBatch batch = MergeMessages("job", 3, inputs);
  ASSERT_EQ(batch.leaves_size(), 2);
  server::ExpandedBatch expanded_batch;
  ASSERT_TRUE(server::ExpandAgentBatch(batch, &expanded_batch).ok());
  const std::vector<server::RankMessage>& expanded = expanded_batch.messages;
  ASSERT_EQ(expanded.size(), 3u);
  EXPECT_EQ(expanded[0].kind, server::RankMessage::Kind::kStaged);
  EXPECT_EQ(expanded[1].rank, 5u);
  EXPECT_EQ(expanded[1].kind, server::RankMessage::Kind::kLeave);
  EXPECT_TRUE(expanded[1].leave_finished);
  EXPECT_EQ(expanded[2].kind, server::RankMessage::Kind::kLeave);
  EXPECT_FALSE(expanded[2].leave_finished);

  // A message may be one kind only.
  v1::AgentBatch twice = batch;
  twice.add_skips()->set_message(1);
  EXPECT_EQ(server::ExpandAgentBatch(twice, &expanded_batch).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MergeTest, AReusedExpansionHoldsOnlyTheLatestBatch) {
  // A large batch with checksums, then a smaller one without: nothing of the first may show.
  std::vector<v1::SessionUp> ups;
  for (int r = 0; r < 6; ++r) ups.push_back(Staged({{2, 0, "dense"}, {2, 1, "expert"}}, 5));
  std::vector<MergeInput> first;
  for (uint32_t r = 0; r < 6; ++r) first.push_back({r, &ups[r]});
  const v1::AgentBatch large = MergeMessages("job", 3, first);
  const v1::SessionUp plain = Staged({{3, 1, "dense"}});
  const v1::SessionUp two = Staged({{3, 0, "dense"}, {3, 1, "dense"}});
  const v1::AgentBatch small = MergeMessages("job", 3, {{9, &plain}, {4, &two}});

  server::ExpandedBatch expanded;
  ASSERT_TRUE(server::ExpandAgentBatch(large, &expanded).ok());
  ASSERT_EQ(expanded.messages.size(), 6u);
  EXPECT_EQ(ItemsOf(expanded.messages[5]),
            (std::vector<std::string>{"2/0/dense#5", "2/1/expert#5"}));
  ASSERT_TRUE(server::ExpandAgentBatch(small, &expanded).ok());
  ASSERT_EQ(expanded.messages.size(), 2u);
  EXPECT_EQ(expanded.messages[0].rank, 9u);
  EXPECT_EQ(ItemsOf(expanded.messages[0]), std::vector<std::string>{"3/1/dense"});
  EXPECT_EQ(expanded.messages[1].rank, 4u);
  EXPECT_EQ(ItemsOf(expanded.messages[1]), (std::vector<std::string>{"3/0/dense", "3/1/dense"}));

  v1::AgentBatch malformed = small;
  malformed.add_staged();  // no messages
  EXPECT_EQ(server::ExpandAgentBatch(malformed, &expanded).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(expanded.messages.empty());
}

// What an expanded message is, in one line: rank, kind and content.
std::string Describe(const server::RankMessage& m) {
  std::string out = absl::StrCat(m.rank, ":");
  switch (m.kind) {
    case server::RankMessage::Kind::kSkip:
      return absl::StrCat(out, "skip ", m.skip_step, " ", m.skip_reason);
    case server::RankMessage::Kind::kSyncDone:
      absl::StrAppend(&out, "sync_done");
      for (const core::SyncDoneItem& d : m.sync_done) {
        absl::StrAppend(&out, " ", d.step, "/", d.chunk, "x", d.executions);
        for (const core::GroupChecksum& c : d.checksums) {
          absl::StrAppend(&out, ",", c.group, "=", c.checksum);
        }
      }
      return out;
    case server::RankMessage::Kind::kLeave:
      return absl::StrCat(out, "leave ", m.leave_finished);
    case server::RankMessage::Kind::kStaged:
      break;
  }
  for (const std::string& item : ItemsOf(m)) absl::StrAppend(&out, " ", item);
  return out;
}

std::vector<std::string> Expanded(const v1::AgentBatch& batch) {
  server::ExpandedBatch expanded;
  const absl::Status s = server::ExpandAgentBatch(batch, &expanded);
  EXPECT_TRUE(s.ok()) << s;
  std::vector<std::string> out;
  for (const server::RankMessage& m : expanded.messages) out.push_back(Describe(m));
  return out;
}

TEST(BatchPartsTest, ConcatenatedBatchesExpandIntoEveryPartsMessagesInOrder) {
  // Node a: ranks 0-1 check in chunk 0 (one shared entry), then rank 1 chunk 1; node b: rank 8
  // votes to skip, rank 9 checks in chunk 0 with a checksum, rank 10 sends an empty batch.
  const v1::SessionUp both = Staged({{4, 0, "dense"}, {4, 1, "expert"}});
  const v1::SessionUp one = Staged({{4, 0, "dense"}});
  v1::SessionUp skip;
  skip.mutable_skip()->set_generation(3);
  skip.mutable_skip()->set_step(4);
  skip.mutable_skip()->set_reason("nan");
  const v1::SessionUp with_checksum = Staged({{4, 0, "dense"}}, 7);
  const v1::SessionUp empty = Staged({});
  const v1::AgentBatch a = MergeMessages("job", 3, std::vector<MergeInput>{{0, &one}, {1, &both}});
  const v1::AgentBatch b = MergeMessages(
      "job", 3, std::vector<MergeInput>{{8, &skip}, {9, &with_checksum}, {10, &empty}});

  v1::AgentBatch merged;
  EXPECT_EQ(AppendBatch(a, &merged), 0u);
  EXPECT_EQ(AppendBatch(b, &merged), 2u);
  EXPECT_EQ(merged.job_id(), "job");
  EXPECT_EQ(merged.generation(), 3u);
  std::vector<std::string> expected = Expanded(a);
  for (const std::string& m : Expanded(b)) expected.push_back(m);
  EXPECT_EQ(Expanded(merged), expected);
  EXPECT_EQ(expected, (std::vector<std::string>{"0: 4/0/dense", "1: 4/0/dense 4/1/expert",
                                                "8:skip 4 nan", "9: 4/0/dense#7", "10:"}));
}

// What `up` from `rank` is, in Describe's form, read from the proto the rank sent.
std::string DescribeSent(uint32_t rank, const v1::SessionUp& up) {
  std::string out = absl::StrCat(rank, ":");
  if (up.has_skip()) return absl::StrCat(out, "skip ", up.skip().step(), " ", up.skip().reason());
  if (up.has_leave()) return absl::StrCat(out, "leave ", up.leave().finished());
  if (up.has_sync_done()) {
    absl::StrAppend(&out, "sync_done");
    for (const v1::SyncDone& d : up.sync_done().items()) {
      absl::StrAppend(&out, " ", d.step(), "/", d.chunk(), "x", std::max(1u, d.executions()));
      for (const v1::GroupChecksum& c : d.checksums()) {
        absl::StrAppend(&out, ",", c.group(), "=", c.checksum());
      }
    }
    return out;
  }
  for (const v1::Staged& i : up.staged().items()) {
    absl::StrAppend(&out, " ", i.step(), "/", i.chunk(), "/", i.optimizer(),
                    i.has_shard_checksum() ? absl::StrCat("#", i.shard_checksum()) : "");
  }
  return out;
}

// A random message of a small vocabulary, so that equal check-ins and SyncDones are common.
v1::SessionUp RandomMessage(std::mt19937& random) {
  v1::SessionUp up;
  switch (random() % 8) {
    case 0:
      up.mutable_skip()->set_generation(3);
      up.mutable_skip()->set_step(random() % 2);
      up.mutable_skip()->set_reason(random() % 2 == 0 ? "nan" : "inf");
      return up;
    case 1:
      up.mutable_leave()->set_generation(3);
      up.mutable_leave()->set_finished(random() % 2 == 0);
      return up;
    case 2:
    case 3:
    case 4: {
      up.mutable_sync_done()->set_generation(3);
      for (uint32_t n = 1 + random() % 2; n > 0; --n) {
        v1::SyncDone* d = up.mutable_sync_done()->add_items();
        d->set_step(random() % 2);
        d->set_chunk(random() % 2);
        d->set_executions(random() % 3);
        for (uint32_t g = random() % 3; g > 0; --g) {
          v1::GroupChecksum* c = d->add_checksums();
          c->set_group(random() % 2 == 0 ? "dp" : "ep");
          c->set_checksum(random() % 2);
        }
      }
      return up;
    }
    default:
      up.mutable_staged()->set_generation(3);
      for (uint32_t n = random() % 3; n > 0; --n) {
        v1::Staged* i = up.mutable_staged()->add_items();
        i->set_step(random() % 2);
        i->set_chunk(random() % 2);
        i->set_optimizer(random() % 2 == 0 ? "dense" : "expert");
        if (random() % 4 == 0) i->set_shard_checksum(random() % 2);
      }
      return up;
  }
}

// Random nodes' messages merged (SyncDones merged or not), some dropped by a relay, the rest
// concatenated: the coordinator expands exactly the messages kept, in order, as their ranks sent
// them.
TEST(BatchPartsTest, RandomNodesThroughARelayExpandIntoExactlyTheMessagesKept) {
  std::mt19937 random(29);
  for (int round = 0; round < 500; ++round) {
    SCOPED_TRACE(round);
    v1::AgentBatch relayed;
    std::vector<std::string> expected;
    for (uint32_t node = 0, nodes = 1 + random() % 3; node < nodes; ++node) {
      std::vector<v1::SessionUp> ups(1 + random() % 12);
      std::vector<MergeInput> inputs;
      for (size_t i = 0; i < ups.size(); ++i) {
        ups[i] = RandomMessage(random);
        inputs.push_back({node * 100 + static_cast<uint32_t>(random() % 4), &ups[i]});
      }
      MergeOptions options;
      options.merge_sync_dones = random() % 4 != 0;
      v1::AgentBatch part = MergeMessages("job", 3, inputs, options);
      ASSERT_TRUE(wire::CheckAgentBatchShape(part).ok());
      std::vector<bool> keep(inputs.size(), true);
      if (random() % 2 == 0) {
        for (size_t i = 0; i < keep.size(); ++i) keep[i] = random() % 3 != 0;
        if (std::find(keep.begin(), keep.end(), true) == keep.end()) continue;
        std::vector<uint32_t> index_of;
        part = KeepMessages(part, keep, &index_of);
        ASSERT_TRUE(wire::CheckAgentBatchShape(part).ok());
      }
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (keep[i]) expected.push_back(DescribeSent(inputs[i].rank, ups[i]));
      }
      AppendBatch(std::move(part), &relayed);
    }
    if (expected.empty()) continue;
    ASSERT_TRUE(wire::CheckAgentBatchShape(relayed).ok());
    EXPECT_EQ(Expanded(relayed), expected);
  }
}

TEST(BatchPartsTest, TheAnswerIsSplitByPartInEachPartsNumbering) {
  v1::AgentAck ack;
  for (uint32_t index : {1u, 2u, 6u, 9u}) {
    v1::MessageStatus* r = ack.add_rejected();
    r->set_index(index);
    r->set_code(9);
    r->set_message(absl::StrCat("message ", index));
  }
  // Parts of 2, 0, 5 and 1 messages: [0, 2), [2, 2), [2, 7), [7, 8); index 9 is past them all.
  const std::vector<std::vector<v1::MessageStatus>> parts = SplitRejected(ack, {2, 0, 5, 1});
  ASSERT_EQ(parts.size(), 4u);
  ASSERT_EQ(parts[0].size(), 1u);
  EXPECT_EQ(parts[0][0].index(), 1u);
  EXPECT_EQ(parts[0][0].message(), "message 1");
  EXPECT_TRUE(parts[1].empty());
  ASSERT_EQ(parts[2].size(), 2u);
  EXPECT_EQ(parts[2][0].index(), 0u);
  EXPECT_EQ(parts[2][0].message(), "message 2");
  EXPECT_EQ(parts[2][1].index(), 4u);
  EXPECT_EQ(parts[2][1].code(), 9);
  EXPECT_TRUE(parts[3].empty());
}

}  // namespace
}  // namespace psync::agent
