// Coordinator: a node agent's batch records the same check-in (or SyncDone) of several of its
// ranks as one merged event, while every count (job counters, audit, metrics, the wire form) still
// counts each rank; ranks on their own Sessions keep one event each. Fake sinks and a FakeClock.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "serve/clock.h"
#include "server/coordinator_metrics.h"
#include "server/owner/coordinator.h"
#include "server/owner/fake_sinks.h"
#include "server/rpc/convert.h"

namespace psync::server {
namespace {

using ::psync::core::testing::Item;
using ::psync::server::testing::DenseDone;
using ::psync::server::testing::DensePlan;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Keeps every event it is handed.
class EventRecorder final : public EventSink {
 public:
  void OnEvents(const std::vector<core::Event>& batch) override {
    events.insert(events.end(), batch.begin(), batch.end());
  }
  // "kind chunk rank" for one rank, "kind chunk [r,r,...]" for a merged record.
  std::vector<std::string> Lines() const {
    std::vector<std::string> lines;
    for (const core::Event& e : events) {
      std::string line = core::EventKindName(e.kind);
      if (e.chunk) absl::StrAppend(&line, " c", *e.chunk);
      if (e.rank) absl::StrAppend(&line, " r", *e.rank);
      if (!e.ranks.empty()) absl::StrAppend(&line, " [", absl::StrJoin(e.ranks, ","), "]");
      lines.push_back(std::move(line));
    }
    return lines;
  }
  std::vector<core::Event> events;
};

constexpr uint32_t kRanks = 4;
constexpr uint32_t kChunks = 2;

class MergedEventsTest : public ::testing::Test {
 protected:
  MergedEventsTest() : coordinator_(CoordinatorOptions(), &clock_) {
    auto created = CoordinatorMetrics::Create(&coordinator_, &registry_);
    EXPECT_TRUE(created.ok()) << created.status();
    metrics_ = std::move(created).value();
    for (core::RankId r = 0; r < kRanks; ++r) {
      EXPECT_TRUE(coordinator_.Join(DensePlan("job", r, kRanks, kChunks)).ok());
    }
    coordinator_.AddEventSink(&events_, nullptr);
  }
  ~MergedEventsTest() override { coordinator_.RemoveEventSink(&events_); }

  // One message per rank, in rank order: each stages both chunks of step 0 (kStaged), or reports
  // SyncDone for both (kSyncDone).
  std::vector<RankMessage> Batch(RankMessage::Kind kind) {
    std::vector<RankMessage> batch(kRanks);
    for (core::RankId r = 0; r < kRanks; ++r) {
      batch[r].rank = r;
      batch[r].kind = kind;
      if (kind == RankMessage::Kind::kStaged) {
        batch[r].staged = staged_;
      } else {
        batch[r].sync_done = done_;
      }
    }
    return batch;
  }
  static void ExpectAllOk(const std::vector<absl::Status>& statuses) {
    ASSERT_EQ(statuses.size(), kRanks);
    for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
  }

  // A RankMessage is a view: its items live here.
  const std::vector<core::StagedItem> staged_ = {Item(0, 0, "dense"), Item(0, 1, "dense")};
  const std::vector<core::SyncDoneItem> done_ = DenseDone(0, {0, 1});
  serve::FakeClock clock_;
  Coordinator coordinator_;
  metrics::Registry registry_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  EventRecorder events_;
};

TEST_F(MergedEventsTest, ANodesBatchRecordsEachSharedInputOnceAndCountsEveryRank) {
  ExpectAllOk(coordinator_.ApplyBatch("job", 1, Batch(RankMessage::Kind::kStaged)));
  // Each chunk's check-ins are one record naming the four ranks in order; the releases follow
  // every check-in they waited for.
  EXPECT_THAT(events_.Lines(), ElementsAre("checkin c0 [0,1,2,3]", "checkin c1 [0,1,2,3]",
                                           "release c0 r3", "release c1 r3"));
  events_.events.clear();

  ExpectAllOk(coordinator_.ApplyBatch("job", 1, Batch(RankMessage::Kind::kSyncDone)));
  // Rank 3's SyncDone of chunk 0 completes it: the sync_complete ends the run of records, so rank
  // 3's SyncDone of chunk 1, after it, starts a record of its own.
  EXPECT_THAT(events_.Lines(),
              ElementsAre("sync_done c0 [0,1,2,3]", "sync_done c1 [0,1,2]", "sync_complete c0",
                          "sync_done c1 r3", "sync_complete c1"));

  // Every count is per rank.
  const JobCounters counters = coordinator_.GetJobStatus("job")->counters;
  EXPECT_EQ(counters.checkins, kRanks * kChunks);
  EXPECT_EQ(counters.syncs_done, kRanks * kChunks);
  EXPECT_EQ(counters.releases, kChunks);
  absl::StatusOr<std::vector<observe::SyncAudit>> audit = coordinator_.Audit("job");
  ASSERT_TRUE(audit.ok()) << audit.status();
  ASSERT_EQ(audit->size(), kChunks);
  for (const observe::SyncAudit& a : *audit) {
    EXPECT_EQ(a.releases, 1u);
    EXPECT_EQ(a.syncs_done, kRanks);
    EXPECT_TRUE(a.complete);
  }
  const std::string text = registry_.Render();
  EXPECT_THAT(text, HasSubstr("psync_checkins_total{job=\"job\"} 8\n"));
  EXPECT_THAT(text, HasSubstr("psync_sync_done_total{job=\"job\"} 8\n"));
  // Every check-in's wait for its release is observed: 8 of them.
  EXPECT_THAT(text, HasSubstr("psync_stage_wait_seconds_count{job=\"job\"} 8\n"));
}

// A rank that sends its items in another order than the rank before it still joins each item's
// record, and one that sends a subset joins only those.
TEST_F(MergedEventsTest, ItemsInAnotherOrderOrASubsetJoinTheirOwnRecords) {
  std::vector<RankMessage> batch = Batch(RankMessage::Kind::kStaged);
  const std::vector<core::StagedItem> reversed = {Item(0, 1, "dense"), Item(0, 0, "dense")};
  const std::vector<core::StagedItem> only_chunk1 = {Item(0, 1, "dense")};
  batch[1].staged = reversed;
  batch[2].staged = only_chunk1;
  ExpectAllOk(coordinator_.ApplyBatch("job", 1, batch));
  // Chunk 1 is complete after rank 3; chunk 0 lacks rank 2.
  EXPECT_THAT(events_.Lines(),
              ElementsAre("checkin c0 [0,1,3]", "checkin c1 [0,1,2,3]", "release c1 r3"));
  EXPECT_EQ(coordinator_.GetJobStatus("job")->counters.checkins, 7u);
}

TEST_F(MergedEventsTest, AMergedEventOnTheWireNamesItsRanksAndNoSingleRank) {
  ExpectAllOk(coordinator_.ApplyBatch("job", 1, Batch(RankMessage::Kind::kStaged)));
  ASSERT_FALSE(events_.events.empty());
  v1::Event wire;
  EventToProto(events_.events[0], &wire);
  EXPECT_EQ(wire.kind(), "checkin");
  EXPECT_FALSE(wire.has_rank());
  EXPECT_THAT(wire.ranks(), ElementsAre(0u, 1u, 2u, 3u));
  EXPECT_EQ(wire.optimizer(), "dense");
  EXPECT_EQ(wire.chunk(), 0u);
  // The log numbers records: the four check-ins of chunk 0 are one index.
  EXPECT_EQ(events_.events[1].index, events_.events[0].index + 1);
}

TEST_F(MergedEventsTest, RanksOnTheirOwnSessionsKeepOneEventEach) {
  for (core::RankId r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(coordinator_.Stage("job", r, 1, staged_).ok());
  }
  EXPECT_THAT(events_.Lines(),
              ElementsAre("checkin c0 r0", "checkin c1 r0", "checkin c0 r1", "checkin c1 r1",
                          "checkin c0 r2", "checkin c1 r2", "checkin c0 r3", "checkin c1 r3",
                          "release c0 r3", "release c1 r3"));
  for (const core::Event& e : events_.events) EXPECT_THAT(e.ranks, IsEmpty());
}

// A rejected message between two ranks' same check-in ends the run of records: the rejection
// stays right after the events of the message it refuses.
TEST_F(MergedEventsTest, ARejectionInTheBatchEndsTheRunOfRecords) {
  std::vector<RankMessage> batch = Batch(RankMessage::Kind::kStaged);
  const std::vector<core::StagedItem> bad = {Item(0, 9, "dense")};  // no chunk 9
  batch[1].staged = bad;
  const std::vector<absl::Status> statuses = coordinator_.ApplyBatch("job", 1, batch);
  ASSERT_EQ(statuses.size(), kRanks);
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(events_.Lines(), ElementsAre("checkin c0 r0", "checkin c1 r0", "rejected",
                                           "checkin c0 [2,3]", "checkin c1 [2,3]"));
  EXPECT_EQ(coordinator_.GetJobStatus("job")->counters.checkins, 6u);
  EXPECT_EQ(coordinator_.GetJobStatus("job")->counters.rejected, 1u);
}

// A node agent's batch as ranks send it, one item per message, interleaved: decided a group of
// equal items at a time (checkin_groups.h). Each message keeps its own answer, a refused one
// included; each group is one record, and the release it completes follows it.
TEST_F(MergedEventsTest, OneItemCheckInsAreDecidedAGroupAtATime) {
  const std::vector<core::StagedItem> items = {Item(0, 0, "dense"), Item(0, 1, "dense"),
                                               Item(0, 9, "dense")};
  std::vector<RankMessage> batch;
  for (core::RankId r = 0; r < kRanks; ++r) {
    for (size_t k : {0, 1}) {
      RankMessage m;
      m.rank = r;
      m.staged = absl::MakeConstSpan(&items[r == 2 && k == 1 ? 2 : k], 1);  // rank 2: no chunk 9
      batch.push_back(m);
    }
  }
  const std::vector<absl::Status> statuses = coordinator_.ApplyBatch("job", 1, batch);
  ASSERT_EQ(statuses.size(), 2 * kRanks);
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (i == 5) continue;
    EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i];
  }
  EXPECT_EQ(statuses[5].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(statuses[5].message(), "items[0].chunk 9 out of range [0, 2)");
  EXPECT_THAT(events_.Lines(), ElementsAre("checkin c0 [0,1,2,3]", "release c0 r3",
                                           "checkin c1 [0,1,3]", "rejected"));
  EXPECT_EQ(coordinator_.GetJobStatus("job")->counters.checkins, 7u);
  EXPECT_EQ(coordinator_.GetJobStatus("job")->counters.rejected, 1u);
}

}  // namespace
}  // namespace psync::server
