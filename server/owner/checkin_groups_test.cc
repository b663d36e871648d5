#include "server/owner/checkin_groups.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::server {
namespace {

using ::testing::ElementsAre;

core::StagedItem Item(core::Step step, core::ChunkId chunk, std::string optimizer,
                      std::optional<uint64_t> checksum = std::nullopt) {
  return {step, chunk, std::move(optimizer), checksum};
}

// Messages viewing `items` (one item each, or `items_per_message` of them).
std::vector<RankMessage> Messages(const std::vector<core::RankId>& ranks,
                                  const std::vector<core::StagedItem>& items) {
  std::vector<RankMessage> out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    RankMessage m;
    m.rank = ranks[i];
    m.staged = absl::MakeConstSpan(&items[i], 1);
    out.push_back(m);
  }
  return out;
}

struct Seen {
  std::string item;
  std::vector<core::RankId> ranks;
  std::vector<uint32_t> messages;
};

std::vector<Seen> Describe(const CheckinGroups& groups) {
  std::vector<Seen> out;
  for (const CheckinGroups::Group& g : groups.groups()) {
    Seen s;
    s.item = absl::StrCat(g.item->step, "/", g.item->chunk, "/", g.item->optimizer, "/",
                          g.item->checksum.value_or(0));
    s.ranks.assign(groups.ranks(g).begin(), groups.ranks(g).end());
    s.messages.assign(groups.messages(g).begin(), groups.messages(g).end());
    out.push_back(s);
  }
  return out;
}

TEST(CheckinGroupsTest, GroupsEqualItemsKeepingTheMessagesOrder) {
  // Two nodes' ranks interleaved, as a relay's concatenation or an agent's arrival order gives.
  const std::vector<core::StagedItem> items = {Item(3, 0, "dense"), Item(3, 0, "expert"),
                                               Item(3, 0, "dense"), Item(3, 1, "dense"),
                                               Item(3, 0, "dense"), Item(3, 0, "expert")};
  const std::vector<RankMessage> messages = Messages({8, 8, 9, 8, 10, 9}, items);
  CheckinGroups groups;
  ASSERT_TRUE(groups.Build(messages));
  const std::vector<Seen> seen = Describe(groups);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].item, "3/0/dense/0");
  EXPECT_THAT(seen[0].ranks, ElementsAre(8, 9, 10));
  EXPECT_THAT(seen[0].messages, ElementsAre(0, 2, 4));
  EXPECT_EQ(seen[1].item, "3/0/expert/0");
  EXPECT_THAT(seen[1].ranks, ElementsAre(8, 9));
  EXPECT_THAT(seen[1].messages, ElementsAre(1, 5));
  EXPECT_EQ(seen[2].item, "3/1/dense/0");
  EXPECT_THAT(seen[2].messages, ElementsAre(3));
}

TEST(CheckinGroupsTest, MessagesViewingOneItemGoToItsGroupWhateverComesBetween) {
  // As ExpandAgentBatch gives a relay's batch of two nodes' parts: each entry's messages view the
  // entry's one item, and the second part's entries carry items equal to the first part's. The
  // entries' messages interleave (each rank checks in "dense" then "expert").
  const std::vector<core::StagedItem> entries = {Item(5, 2, "dense", 7), Item(5, 2, "expert", 7),
                                                 Item(5, 2, "dense", 7), Item(5, 2, "expert", 7)};
  std::vector<RankMessage> messages;
  for (core::RankId rank : {0, 1, 2, 8, 9}) {
    const size_t part = rank < 8 ? 0 : 2;  // the first node's entries, or the second's
    for (size_t e = part; e < part + 2; ++e) {
      RankMessage m;
      m.rank = rank;
      m.staged = absl::MakeConstSpan(&entries[e], 1);
      messages.push_back(m);
    }
  }
  CheckinGroups groups;
  ASSERT_TRUE(groups.Build(messages));
  const std::vector<Seen> seen = Describe(groups);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].item, "5/2/dense/7");
  EXPECT_THAT(seen[0].ranks, ElementsAre(0, 1, 2, 8, 9));
  EXPECT_THAT(seen[0].messages, ElementsAre(0, 2, 4, 6, 8));
  EXPECT_EQ(seen[1].item, "5/2/expert/7");
  EXPECT_THAT(seen[1].ranks, ElementsAre(0, 1, 2, 8, 9));
  EXPECT_THAT(seen[1].messages, ElementsAre(1, 3, 5, 7, 9));
}

TEST(CheckinGroupsTest, ChecksumsSplitGroups) {
  const std::vector<core::StagedItem> items = {Item(0, 0, "dense", 5), Item(0, 0, "dense", 6),
                                               Item(0, 0, "dense", 5)};
  CheckinGroups groups;
  ASSERT_TRUE(groups.Build(Messages({0, 1, 2}, items)));
  const std::vector<Seen> seen = Describe(groups);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_THAT(seen[0].ranks, ElementsAre(0, 2));
  EXPECT_THAT(seen[1].ranks, ElementsAre(1));
}

TEST(CheckinGroupsTest, MessageByMessageWhenOrderCouldMatter) {
  CheckinGroups groups;
  // A rank repeating a check-in with another checksum: which comes first decides which one
  // conflicts.
  const std::vector<core::StagedItem> other = {Item(0, 0, "dense", 1), Item(0, 1, "dense"),
                                               Item(0, 0, "dense", 2)};
  EXPECT_FALSE(groups.Build(Messages({4, 4, 4}, other)));
  EXPECT_TRUE(groups.groups().empty());
  // The same rank's different check-ins are independent.
  EXPECT_TRUE(groups.Build(Messages({4, 4}, {Item(0, 0, "dense"), Item(0, 0, "expert")})));

  // A SyncDone, a skip, a leave, or a message of two items.
  const std::vector<core::StagedItem> two = {Item(0, 0, "dense"), Item(0, 1, "dense")};
  for (RankMessage::Kind kind :
       {RankMessage::Kind::kSyncDone, RankMessage::Kind::kSkip, RankMessage::Kind::kLeave}) {
    std::vector<RankMessage> messages = Messages({1, 2}, two);
    messages[1].kind = kind;
    messages[1].staged = {};
    EXPECT_FALSE(groups.Build(messages));
  }
  RankMessage both;
  both.rank = 1;
  both.staged = two;
  EXPECT_FALSE(groups.Build({both}));
  EXPECT_FALSE(groups.Build({RankMessage{}}));  // an empty StagedBatch (refused by the tracker)
}

// Ranks out of order are grouped as they came; a rank repeating an item stays in its group, in
// its messages' order (StageMerged answers the second as a duplicate, as on its own).
TEST(CheckinGroupsTest, RanksInAnyOrderAndRepeatsOfAnItemInItsGroup) {
  const std::vector<core::StagedItem> items(4, Item(0, 0, "dense"));
  CheckinGroups groups;
  ASSERT_TRUE(groups.Build(Messages({3, 1, 2}, items)));
  ASSERT_EQ(groups.groups().size(), 1u);
  EXPECT_THAT(Describe(groups)[0].ranks, ElementsAre(3, 1, 2));
  ASSERT_TRUE(groups.Build(Messages({1, 2, 5, 1}, items)));
  ASSERT_EQ(groups.groups().size(), 1u);
  EXPECT_THAT(Describe(groups)[0].ranks, ElementsAre(1, 2, 5, 1));
  EXPECT_THAT(Describe(groups)[0].messages, ElementsAre(0, 1, 2, 3));
}

// Two checksums of one check-in: a repeat is found wherever it is, also past the groups Build
// scans for an equal item, and only a rank in both makes the batch go one by one.
TEST(CheckinGroupsTest, ARankInTwoChecksumsOfACheckinIsFoundApart) {
  std::vector<core::StagedItem> items = {Item(0, 0, "dense", 1)};
  std::vector<core::RankId> ranks = {1};
  for (uint32_t c = 1; c <= 70; ++c) {  // more distinct items between them than Build scans
    items.push_back(Item(0, c, "dense"));
    ranks.push_back(2);
  }
  items.push_back(Item(0, 0, "dense", 2));
  ranks.push_back(3);
  CheckinGroups groups;
  EXPECT_TRUE(groups.Build(Messages(ranks, items)));
  EXPECT_EQ(groups.groups().size(), 72u);
  ranks.back() = 1;
  EXPECT_FALSE(groups.Build(Messages(ranks, items)));
  // An equal item past the scan starts a group of its own; its ranks are checked the same way.
  items.back() = Item(0, 0, "dense", 1);
  EXPECT_FALSE(groups.Build(Messages(ranks, items)));
  ranks.back() = 3;
  EXPECT_TRUE(groups.Build(Messages(ranks, items)));
  EXPECT_EQ(groups.groups().size(), 72u);
}

TEST(CheckinGroupsTest, MoreDistinctItemsThanANodeSendsGoOneByOne) {
  std::vector<core::StagedItem> items;
  std::vector<core::RankId> ranks;
  for (uint32_t c = 0; c < 257; ++c) {
    items.push_back(Item(0, c, "dense"));
    ranks.push_back(0);
  }
  CheckinGroups groups;
  EXPECT_FALSE(groups.Build(Messages(ranks, items)));
  items.pop_back();
  ranks.pop_back();
  EXPECT_TRUE(groups.Build(Messages(ranks, items)));
  EXPECT_EQ(groups.groups().size(), 256u);
}

// "begin-end" for a run applied one by one, "begin-end grouped(n)" for a run of n groups.
std::vector<std::string> RunsOf(absl::Span<const RankMessage> messages) {
  std::vector<std::string> out;
  for (const BatchRun& run : SplitIntoRuns(messages)) {
    out.push_back(run.groups.has_value() ? absl::StrCat(run.begin, "-", run.end, " grouped(",
                                                        run.groups->groups().size(), ")")
                                         : absl::StrCat(run.begin, "-", run.end));
  }
  return out;
}

RankMessage Other(core::RankId rank, RankMessage::Kind kind) {
  RankMessage m;
  m.rank = rank;
  m.kind = kind;
  return m;
}

TEST(SplitIntoRunsTest, OnlyCheckinsAreOneGroupedRun) {
  const std::vector<core::StagedItem> items = {Item(0, 0, "dense"), Item(0, 0, "dense"),
                                               Item(0, 0, "expert")};
  EXPECT_THAT(RunsOf(Messages({1, 2, 1}, items)), ElementsAre("0-3 grouped(2)"));
  EXPECT_THAT(RunsOf({}), ElementsAre());
}

// A node's SyncDones of one chunk before its ranks' next check-ins: the check-ins after them are
// still grouped, and a run between two others keeps its place.
TEST(SplitIntoRunsTest, CheckinsBetweenOtherMessagesAreGroupedInTheirPlace) {
  const std::vector<core::StagedItem> items = {Item(1, 0, "dense"), Item(1, 0, "dense"),
                                               Item(1, 1, "dense"), Item(1, 1, "dense")};
  std::vector<RankMessage> batch;
  batch.push_back(Other(1, RankMessage::Kind::kSyncDone));
  batch.push_back(Other(2, RankMessage::Kind::kSyncDone));
  std::vector<RankMessage> checkins = Messages({1, 2, 1, 2}, items);
  batch.insert(batch.end(), checkins.begin(), checkins.begin() + 2);
  batch.push_back(Other(3, RankMessage::Kind::kSkip));
  batch.insert(batch.end(), checkins.begin() + 2, checkins.end());
  EXPECT_THAT(RunsOf(batch), ElementsAre("0-2", "2-4 grouped(1)", "4-5", "5-7 grouped(1)"));
}

// A run whose order could matter (a rank repeating a check-in with another checksum) is applied
// one by one, joined to the messages applied one by one around it.
TEST(SplitIntoRunsTest, ARunThatCannotBeGroupedJoinsItsNeighboursOneByOne) {
  const std::vector<core::StagedItem> items = {Item(0, 0, "dense", 1), Item(0, 0, "dense", 2),
                                               Item(0, 1, "dense"), Item(0, 1, "dense")};
  std::vector<RankMessage> batch;
  batch.push_back(Other(1, RankMessage::Kind::kSyncDone));
  std::vector<RankMessage> checkins = Messages({4, 4, 5, 6}, items);
  batch.insert(batch.end(), checkins.begin(), checkins.begin() + 2);  // rank 4 twice
  batch.push_back(Other(2, RankMessage::Kind::kSyncDone));
  batch.insert(batch.end(), checkins.begin() + 2, checkins.end());
  EXPECT_THAT(RunsOf(batch), ElementsAre("0-4", "4-6 grouped(1)"));
}

}  // namespace
}  // namespace psync::server
