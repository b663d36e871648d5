#include "server/observe/job_observer.h"

#include "gtest/gtest.h"

namespace psync::observe {
namespace {

using core::Event;
using core::EventKind;

absl::Time At(int ms) { return absl::UnixEpoch() + absl::Milliseconds(ms); }

Event Make(EventKind kind, int ms, uint64_t step, uint32_t chunk,
           std::optional<uint32_t> rank = {}) {
  Event e;
  e.kind = kind;
  e.time = At(ms);
  e.job_id = "j";
  e.generation = 1;
  e.step = step;
  e.chunk = chunk;
  e.rank = rank;
  return e;
}

ObserverOptions Options() {
  ObserverOptions o;
  o.deadline.initial = absl::Milliseconds(50);
  o.deadline.min_samples = 2;
  o.deadline.multiplier = 2;
  o.deadline.floor = absl::Milliseconds(1);
  return o;
}

core::JobSnapshot WaitingSnapshot(uint64_t step, absl::Duration waiting) {
  core::JobSnapshot s;
  s.job_id = "j";
  s.generation = 1;
  core::ChunkSnapshot c;
  c.chunk = 0;
  c.step = step;
  c.state = "WAITING";
  c.staged = {{0, "dense"}};
  c.missing = {{1, "expert"}};
  c.waiting = waiting;
  s.chunks.push_back(c);
  return s;
}

TEST(JobObserverTest, StallNamesMissingContributorsOnceAfterTheDeadline) {
  JobObserver observer(Options());
  EXPECT_TRUE(observer.Inspect(At(40), WaitingSnapshot(0, absl::Milliseconds(40))).empty());
  auto stalls = observer.Inspect(At(51), WaitingSnapshot(0, absl::Milliseconds(51)));
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].kind, EventKind::kStall);
  EXPECT_EQ(*stalls[0].step, 0u);
  EXPECT_EQ(*stalls[0].chunk, 0u);
  ASSERT_EQ(stalls[0].contributors.size(), 1u);
  EXPECT_EQ(stalls[0].contributors[0].rank, 1u);
  EXPECT_EQ(stalls[0].contributors[0].optimizer, "expert");
  EXPECT_EQ(stalls[0].detail, "chunk 0 step 0 waited 51ms (deadline 50ms) for rank 1 expert");
  EXPECT_EQ(stalls[0].missing_count, 1u);
  EXPECT_TRUE(observer.Inspect(At(90), WaitingSnapshot(0, absl::Milliseconds(90))).empty())
      << "reported once";
  EXPECT_EQ(observer.Inspect(At(200), WaitingSnapshot(1, absl::Milliseconds(60))).size(), 1u)
      << "the next step stalls again";
  EXPECT_EQ(observer.stalls(), 2u);
}

TEST(JobObserverTest, SyncStallNamesRanksWithoutSyncDone) {
  JobObserver observer(Options());
  core::JobSnapshot s = WaitingSnapshot(3, absl::Milliseconds(70));
  s.chunks[0].state = "RELEASED";
  s.chunks[0].sync_pending = {2, 5};
  auto stalls = observer.Inspect(At(0), s);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].ranks, (std::vector<core::RankId>{2, 5}));
  EXPECT_EQ(stalls[0].detail,
            "chunk 0 step 3 released 70ms ago (deadline 50ms); no SyncDone from ranks [2,5]");
}

// A stall names at most stall_list_limit of the missing, in its list and its text, and counts
// them all: from the lists ChunkAt cut short (lists_of) or from a snapshot's whole lists.
TEST(JobObserverTest, StallNamesTheFirstMissingUpToTheLimitAndCountsThemAll) {
  ObserverOptions options = Options();
  options.stall_list_limit = 2;
  JobObserver observer(options);
  size_t asked_limit = 0;
  const JobObserver::ListsOf lists_of = [&](const core::ChunkSnapshot& brief, size_t limit) {
    asked_limit = limit;
    core::ChunkSnapshot c = brief;
    c.missing = {{1, "dense"}, {1, "expert"}};  // as ChunkAt lists them: the first `limit`
    c.missing_count = 4099;
    return c;
  };
  core::JobSnapshot waiting = WaitingSnapshot(0, absl::Milliseconds(51));
  waiting.chunks[0].missing.clear();
  auto stalls = observer.Inspect(At(51), waiting, lists_of);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(asked_limit, 2u);
  EXPECT_EQ(stalls[0].contributors.size(), 2u);
  EXPECT_EQ(stalls[0].missing_count, 4099u);
  EXPECT_EQ(stalls[0].detail,
            "chunk 0 step 0 waited 51ms (deadline 50ms) for rank 1 dense, rank 1 expert and 4097 "
            "more");
  core::JobSnapshot syncing = WaitingSnapshot(1, absl::Milliseconds(70));
  syncing.chunks[0].state = "RELEASED";
  syncing.chunks[0].sync_pending = {2, 5, 6};
  stalls = observer.Inspect(At(0), syncing);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].ranks, (std::vector<core::RankId>{2, 5}));
  EXPECT_EQ(stalls[0].missing_count, 3u);
  EXPECT_EQ(stalls[0].detail,
            "chunk 0 step 1 released 70ms ago (deadline 50ms); no SyncDone from ranks [2,5] and 1 "
            "more");
  // At the limit, nothing more is said.
  core::JobSnapshot two = WaitingSnapshot(2, absl::Milliseconds(70));
  two.chunks[0].missing = {{3, "dense"}, {4, "dense"}};
  stalls = observer.Inspect(At(0), two);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].missing_count, 2u);
  EXPECT_EQ(stalls[0].detail,
            "chunk 0 step 2 waited 70ms (deadline 50ms) for rank 3 dense, rank 4 dense");
}

TEST(JobObserverTest, DeadlineIsLearnedFromReleaseWaits) {
  JobObserver observer(Options());
  for (uint64_t step = 0; step < 2; ++step) {
    Event release = Make(EventKind::kRelease, 10, step, 0, 1);
    release.duration = absl::Milliseconds(10);
    observer.OnEvent(release);
  }
  EXPECT_EQ(observer.Deadline(0), absl::Milliseconds(20));
  EXPECT_TRUE(observer.Inspect(At(0), WaitingSnapshot(2, absl::Milliseconds(19))).empty());
  EXPECT_EQ(observer.Inspect(At(0), WaitingSnapshot(2, absl::Milliseconds(21))).size(), 1u);
}

TEST(JobObserverTest, AuditCountsReleasesSyncsAndViolations) {
  JobObserver observer(Options());
  observer.OnEvent(Make(EventKind::kCheckin, 0, 7, 1, 0));
  observer.OnEvent(Make(EventKind::kCheckin, 30, 7, 1, 1));
  Event early = Make(EventKind::kViolation, 5, 7, 1, 0);
  early.detail =
      "early sync: rank 0 synced step 7 chunk 1 before its release; not staged: rank 1 dense";
  observer.OnEvent(early);
  Event release = Make(EventKind::kRelease, 30, 7, 1, 1);
  release.duration = absl::Milliseconds(30);
  release.sequence = 9;
  observer.OnEvent(release);
  observer.OnEvent(Make(EventKind::kSyncDone, 31, 7, 1, 0));
  Event repeated = Make(EventKind::kViolation, 32, 7, 1, 1);
  repeated.detail = "repeated sync: rank 1 executed the sync of step 7 chunk 1 2 times";
  observer.OnEvent(repeated);
  observer.OnEvent(Make(EventKind::kSyncDone, 32, 7, 1, 1));
  Event complete = Make(EventKind::kSyncComplete, 32, 7, 1);
  complete.duration = absl::Milliseconds(2);
  observer.OnEvent(complete);

  auto audit = observer.Audit();
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].step, 7u);
  EXPECT_EQ(audit[0].chunk, 1u);
  EXPECT_EQ(audit[0].sequence, 9u);
  EXPECT_EQ(audit[0].releases, 1u);
  EXPECT_EQ(audit[0].syncs_done, 2u);
  EXPECT_TRUE(audit[0].complete);
  EXPECT_EQ(audit[0].early_syncs, 1u);
  EXPECT_EQ(audit[0].repeated_syncs, 1u);
  EXPECT_EQ(audit[0].wait, absl::Milliseconds(30));
  EXPECT_EQ(audit[0].sync_duration, absl::Milliseconds(2));
  EXPECT_EQ(observer.totals().released, 1u);
  EXPECT_EQ(observer.totals().double_releases, 0u);
  // Straggler: rank 1 checked in 30 ms after rank 0.
  auto top = observer.TopStragglers(1);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].rank, 1u);
  EXPECT_DOUBLE_EQ(top[0].last_seconds, 0.030);

  observer.OnEvent(release);  // a second release of the same (step, chunk) is audited
  EXPECT_EQ(observer.totals().double_releases, 1u);
  EXPECT_EQ(observer.Audit()[0].releases, 2u);
  EXPECT_EQ(observer.totals().resumed, 0u);
}

// A release for ranks that synced the (step, chunk) before this coordinator held the job (a
// restart or a move) is released once here and marked resumed: counted in `released` and in
// `resumed`, never a double release.
TEST(JobObserverTest, AResumedReleaseIsCountedAsResumed) {
  JobObserver observer(Options());
  Event resumed = Make(EventKind::kRelease, 10, 4, 0, 0);
  resumed.resumed = true;
  observer.OnEvent(resumed);
  observer.OnEvent(Make(EventKind::kRelease, 12, 4, 1, 0));
  EXPECT_EQ(observer.totals().released, 2u);
  EXPECT_EQ(observer.totals().resumed, 1u);
  EXPECT_EQ(observer.totals().double_releases, 0u);
  const auto audit = observer.Audit();
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_TRUE(audit[0].resumed);
  EXPECT_FALSE(audit[1].resumed);
}

TEST(JobObserverTest, CheckinsOfInterleavedChunksEachCountAtTheirOwnRelease) {
  JobObserver observer(Options());
  // A node's batches bring runs of one chunk; runs of two chunks interleave here.
  observer.OnEvent(Make(EventKind::kCheckin, 0, 4, 0, 0));
  observer.OnEvent(Make(EventKind::kCheckin, 0, 4, 0, 1));
  observer.OnEvent(Make(EventKind::kCheckin, 1, 4, 1, 2));
  observer.OnEvent(Make(EventKind::kCheckin, 40, 4, 0, 3));
  // A copy made between two check-ins of one chunk keeps counting into its own records.
  JobObserver copy = observer;
  observer.OnEvent(Make(EventKind::kCheckin, 50, 4, 1, 4));
  Event release = Make(EventKind::kRelease, 50, 4, 1, 4);
  release.duration = absl::Milliseconds(49);
  observer.OnEvent(release);  // chunk 1: ranks 2 (first) and 4, 49 ms late
  auto top = observer.TopStragglers(5);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].rank, 4u);
  EXPECT_DOUBLE_EQ(top[0].last_seconds, 0.049);
  EXPECT_EQ(top[1].rank, 2u);
  release = Make(EventKind::kRelease, 40, 4, 0, 3);
  release.duration = absl::Milliseconds(40);
  observer.OnEvent(release);  // chunk 0: ranks 0, 1 and 3, 40 ms late
  EXPECT_EQ(observer.TopStragglers(5).size(), 5u);

  copy.OnEvent(Make(EventKind::kCheckin, 60, 4, 0, 5));
  copy.OnEvent(release);  // chunk 0 in the copy: ranks 0, 1, 3 and 5 (60 ms late)
  top = copy.TopStragglers(5);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].rank, 5u);
  EXPECT_DOUBLE_EQ(top[0].last_seconds, 0.060);
  EXPECT_EQ(top[1].rank, 3u);
  EXPECT_DOUBLE_EQ(top[1].last_seconds, 0.040);
}

TEST(JobObserverTest, AChunkCountsOnlyItsOwnCheckinsAfterEarlierChunksReleased) {
  // Released chunks' check-in lists are kept for the next chunks: none may carry a check-in over.
  JobObserver observer(Options());
  for (uint64_t step = 4; step < 14; ++step) {  // more releases than lists are kept
    const int t = static_cast<int>(step) * 100;
    observer.OnEvent(Make(EventKind::kCheckin, t, step, 0, 0));
    observer.OnEvent(Make(EventKind::kCheckin, t + 30, step, 0, 1));
    Event release = Make(EventKind::kRelease, t + 30, step, 0, 1);
    release.duration = absl::Milliseconds(30);
    observer.OnEvent(release);
  }
  observer.OnEvent(Make(EventKind::kCheckin, 2000, 20, 0, 2));
  Event release = Make(EventKind::kRelease, 2000, 20, 0, 2);
  release.duration = absl::ZeroDuration();
  observer.OnEvent(release);
  const std::vector<StragglerScore> by_rank = observer.StragglersByRank();
  ASSERT_EQ(by_rank.size(), 3u);
  EXPECT_EQ(by_rank[0].samples, 10u);  // ranks 0 and 1: one sample at each of their 10 releases
  EXPECT_EQ(by_rank[1].samples, 10u);
  EXPECT_DOUBLE_EQ(by_rank[1].last_seconds, 0.030);
  EXPECT_EQ(by_rank[1].times_last, 10u);
  EXPECT_EQ(by_rank[2].rank, 2u);  // rank 2 alone at step 20
  EXPECT_EQ(by_rank[2].samples, 1u);
  EXPECT_EQ(by_rank[2].times_last, 0u);
}

TEST(JobObserverTest, AnEventOfAStepOlderThanAFullAuditKeepsItsRecord) {
  ObserverOptions options = Options();
  options.audit_capacity = 2;
  JobObserver observer(options);
  observer.OnEvent(Make(EventKind::kSyncDone, 0, 5, 0, 0));
  observer.OnEvent(Make(EventKind::kSyncDone, 0, 6, 0, 0));
  observer.OnEvent(Make(EventKind::kSyncDone, 0, 1, 0, 0));  // older than both
  observer.OnEvent(Make(EventKind::kSyncDone, 0, 1, 0, 1));
  auto audit = observer.Audit();
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[0].step, 1u);
  EXPECT_EQ(audit[0].syncs_done, 2u);
  EXPECT_EQ(audit[1].step, 6u);
  EXPECT_EQ(audit[1].syncs_done, 1u);
}

}  // namespace
}  // namespace psync::observe
