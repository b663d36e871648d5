// JobTracker::StageMerged against its definition: the same check-in of several ranks, applied to
// one tracker as a group and to another rank by rank with Stage, must give the same statuses,
// notices, events (as a multiset: the group's release comes after the group) and state. Hand-made
// cases for each way a rank leaves the common case, then seeded random runs of check-ins,
// SyncDones and skip votes. Then StageInSlots, StageMerged's part that an owner runs for several
// chunks at once: what it records, what it leaves, and that it creates and releases nothing.
#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/job_tracker.h"
#include "server/core/test_util.h"
#include "server/core/twin_trackers.h"

namespace psync::core::testing {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1700000000);
constexpr uint32_t kWorld = 6;

// 6 ranks, 2 chunks, dp = all ranks. Chunk 0: every rank stages dense and expert. Chunk 1: ranks
// 0-3 stage dense, rank 4 expert, rank 5 nothing (a member only).
std::vector<RankPlan> Plans() {
  std::vector<RankId> all;
  for (RankId r = 0; r < kWorld; ++r) all.push_back(r);
  std::vector<RankPlan> plans;
  for (RankId r = 0; r < kWorld; ++r) {
    std::vector<std::string> chunk1;
    if (r < 4) chunk1 = {"dense"};
    if (r == 4) chunk1 = {"expert"};
    plans.push_back(Plan(
        r, kWorld, 2,
        {Part(0, {"dense", "expert"}, {Group("dp", all)}), Part(1, chunk1, {Group("dp", all)})}));
  }
  return plans;
}

// Two trackers fed the same inputs: `merged` takes check-in groups through StageMerged, `single`
// rank by rank through Stage. Outputs compare as multisets: the group's release comes after the
// group.
class Twins {
 public:
  Twins() : twins_(TwinTrackers::Order::kAnyOrder, kStart) {}

  void JoinAll() { twins_.JoinAll(Plans()); }
  uint64_t generation() { return twins_.single().generation(); }
  void Tick() { twins_.Tick(); }

  // The group on both; returns the statuses (equal on both, or the test fails).
  std::vector<std::string> Stage(const StagedItem& item, const std::vector<RankId>& ranks,
                                 uint64_t generation) {
    Decisions a, b;
    std::vector<absl::Status> grouped(ranks.size());
    twins_.grouped().StageMerged(generation, item, ranks, twins_.now(), &a,
                                 absl::MakeSpan(grouped));
    std::vector<std::string> texts;
    std::vector<std::string> one_by_one;
    for (size_t i = 0; i < ranks.size(); ++i) {
      texts.push_back(StatusText(grouped[i]));
      one_by_one.push_back(StatusText(twins_.single().Stage(
          ranks[i], generation, absl::MakeConstSpan(&item, 1), twins_.now(), &b)));
    }
    EXPECT_EQ(texts, one_by_one);
    twins_.ExpectSameOutput(a, b);
    releases_ += EventsOf(a, EventKind::kRelease).size();
    return texts;
  }
  // Any other input, on both.
  template <typename Fn>
  std::string Both(Fn fn) {
    return twins_.Both(fn);
  }
  absl::Time now() const { return twins_.now(); }
  // Releases decided by groups so far.
  size_t releases() const { return releases_; }
  JobTracker& merged() { return twins_.grouped(); }

 private:
  TwinTrackers twins_;
  size_t releases_ = 0;
};

const std::string kOk = "OK: ";

TEST(StageMergedTest, CommonCaseReleasesOnceAfterTheGroup) {
  Twins t;
  t.JoinAll();
  const std::vector<RankId> all = {0, 1, 2, 3, 4, 5};
  EXPECT_THAT(t.Stage(Item(0, 0, "expert"), all, t.generation()), ::testing::Each(kOk));
  EXPECT_THAT(t.Stage(Item(0, 0, "dense"), {5, 3, 1}, t.generation()), ::testing::Each(kOk));
  // The group that completes chunk 0 releases it once, after its last rank.
  Decisions out;
  std::vector<absl::Status> statuses(3);
  const std::vector<RankId> rest = {0, 2, 4};
  t.merged().StageMerged(t.generation(), Item(0, 0, "dense"), rest, t.now(), &out,
                         absl::MakeSpan(statuses));
  EXPECT_THAT(EventTexts(out), ::testing::ElementsAre(
                                   "checkin g1 s0 c0 r0 dense", "checkin g1 s0 c0 r2 dense",
                                   "checkin g1 s0 c0 r4 dense", "release g1 s0 c0 r4 dense seq1"));
  EXPECT_EQ(out.deliveries.size(), kWorld);
}

TEST(StageMergedTest, OneRecordWhenMerging) {
  Twins t;
  t.JoinAll();
  Decisions out;
  out.merge_rank_events = true;
  std::vector<absl::Status> statuses(4);
  const std::vector<RankId> ranks = {0, 1, 2, 3};
  t.merged().StageMerged(t.generation(), Item(0, 1, "dense"), ranks, t.now(), &out,
                         absl::MakeSpan(statuses));
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_THAT(out.events[0].ranks, ::testing::ElementsAre(0, 1, 2, 3));
  EXPECT_FALSE(out.events[0].rank.has_value());
}

TEST(StageMergedTest, EachWayOutOfTheCommonCaseAnswersAsStage) {
  Twins t;
  t.JoinAll();
  const uint64_t g = t.generation();
  // A rank repeated in the group: the second is a duplicate. Rank 9 is not in the job.
  EXPECT_THAT(t.Stage(Item(0, 0, "dense"), {0, 9, 0, 1}, g),
              ::testing::ElementsAre(kOk, "FAILED_PRECONDITION: rank 9 has not joined generation 1",
                                     kOk, kOk));
  // Rank 5 does not declare chunk 1; rank 4 declares expert there, not dense.
  const std::vector<std::string> undeclared = t.Stage(Item(0, 1, "dense"), {3, 4, 5}, g);
  EXPECT_EQ(undeclared[0], kOk);
  EXPECT_THAT(undeclared[1], ::testing::StartsWith("INVALID_ARGUMENT: items[0].optimizer 'dense'"));
  EXPECT_THAT(undeclared[2], ::testing::StartsWith("INVALID_ARGUMENT: items[0].optimizer 'dense'"));
  // A conflicting duplicate (another checksum) beside fresh check-ins.
  t.Stage(Item(0, 0, "expert", 7), {2}, g);
  const std::vector<std::string> conflict = t.Stage(Item(0, 0, "expert", 8), {1, 2, 3}, g);
  EXPECT_THAT(conflict, ::testing::ElementsAre(kOk, ::testing::StartsWith("ALREADY_EXISTS"), kOk));
  // A step not reached, a chunk out of range, another generation.
  EXPECT_THAT(t.Stage(Item(1, 0, "dense"), {4}, g)[0],
              ::testing::StartsWith("FAILED_PRECONDITION"));
  EXPECT_THAT(t.Stage(Item(0, 2, "dense"), {4}, g)[0], ::testing::StartsWith("INVALID_ARGUMENT"));
  EXPECT_THAT(t.Stage(Item(0, 0, "dense"), {4, 5}, g + 1),
              ::testing::Each(::testing::StartsWith("FAILED_PRECONDITION")));
}

TEST(StageMergedTest, SkipVoteBesideTheGroupAbortsAtTheSameRank) {
  Twins t;
  t.JoinAll();
  const uint64_t g = t.generation();
  EXPECT_EQ(t.Both([&](JobTracker& tr, Decisions* out) {
    return tr.Skip(3, g, 0, "found_inf", kStart, out);
  }),
            kOk);
  const std::vector<std::string> statuses = t.Stage(Item(0, 0, "dense"), {0, 1}, g);
  EXPECT_EQ(statuses[0],
            "ABORTED: skip disagreement at step 0: rank 0 staged while ranks [3] skip it "
            "(found_inf)");
  EXPECT_THAT(statuses[1], ::testing::StartsWith("ABORTED: job 'job' generation 1 was aborted"));
}

TEST(StageMergedTest, BeforeThePlanIsCompleteEveryRankGoesThroughStage) {
  Twins t;
  std::vector<RankPlan> plans = Plans();
  for (RankId r = 0; r < 3; ++r) {
    t.Both([&](JobTracker& tr, Decisions* out) { return tr.Join(plans[r], kStart, out).status(); });
  }
  EXPECT_THAT(t.Stage(Item(0, 0, "dense"), {0, 1, 2}, t.generation()), ::testing::Each(kOk));
  for (RankId r = 3; r < kWorld; ++r) {
    t.Both([&](JobTracker& tr, Decisions* out) { return tr.Join(plans[r], kStart, out).status(); });
  }
  // The chunk-step began while the plan formed: its marks are keyed, which Stage handles.
  EXPECT_THAT(t.Stage(Item(0, 0, "dense"), {3, 4, 5, 0}, t.generation()),
              ::testing::ElementsAre(kOk, kOk, kOk, kOk));
}

// Consecutive ranks (a node's, in rank order) are recorded as a run when each is in the common
// case; whatever breaks the run (a check-in already in, another checksum, a rank that is not a
// contributor or not in the job), every answer, record and state is Stage's, rank by rank.
TEST(StageMergedTest, ConsecutiveRanksAnswerAsStageWhateverBreaksTheRun) {
  Twins t;
  t.JoinAll();
  const uint64_t g = t.generation();
  EXPECT_THAT(t.Stage(Item(0, 0, "dense"), {0, 1, 2, 3, 4, 5}, g), ::testing::Each(kOk));
  EXPECT_EQ(t.Stage(Item(0, 0, "expert", 7), {2}, g)[0], kOk);
  // Rank 2's is a duplicate in the run, answered OK and recorded once.
  EXPECT_THAT(t.Stage(Item(0, 0, "expert", 7), {0, 1, 2, 3}, g), ::testing::Each(kOk));
  // Ranks 2 and 3 staged expert with checksum 7: another checksum conflicts; 4 and 5 complete
  // the chunk, released once.
  EXPECT_THAT(t.Stage(Item(0, 0, "expert", 8), {2, 3, 4, 5}, g),
              ::testing::ElementsAre(::testing::StartsWith("ALREADY_EXISTS"),
                                     ::testing::StartsWith("ALREADY_EXISTS"), kOk, kOk));
  EXPECT_EQ(t.releases(), 1u);
  // Chunk 1: rank 4 stages expert there and rank 5 nothing; rank 6 is not in the job.
  const std::vector<std::string> past = t.Stage(Item(0, 1, "dense"), {0, 1, 2, 3, 4, 5, 6}, g);
  EXPECT_THAT(std::vector<std::string>(past.begin(), past.begin() + 4), ::testing::Each(kOk));
  EXPECT_THAT(past[4], ::testing::StartsWith("INVALID_ARGUMENT: items[0].optimizer 'dense'"));
  EXPECT_THAT(past[5], ::testing::StartsWith("INVALID_ARGUMENT: items[0].optimizer 'dense'"));
  EXPECT_EQ(past[6], "FAILED_PRECONDITION: rank 6 has not joined generation 1");
}

// The consecutive ranks of a group are one record, with the group's other ranks around them.
TEST(StageMergedTest, ARunJoinsTheGroupsRecord) {
  Twins t;
  t.JoinAll();
  Decisions out;
  out.merge_rank_events = true;
  const std::vector<RankId> ranks = {5, 0, 1, 2, 3, 4};
  std::vector<absl::Status> statuses(ranks.size());
  t.merged().StageMerged(t.generation(), Item(0, 0, "dense"), ranks, t.now(), &out,
                         absl::MakeSpan(statuses));
  EXPECT_THAT(statuses, ::testing::Each(::testing::Property(&absl::Status::ok, true)));
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_THAT(out.events[0].ranks, ::testing::ElementsAre(5, 0, 1, 2, 3, 4));
}

// Seeded random runs: groups of random ranks (repeats and strangers included) with random items,
// generations and checksums, between SyncDones and skip votes, on both trackers. With
// `consecutive`, each group is a run of consecutive ranks from a random one (past the job's ranks
// at times), with now and then one rank of it repeated or replaced.
void RandomRunsMatchStageRankByRank(bool consecutive) {
  const std::vector<std::string> optimizers = {"dense", "expert", "other"};
  int accepted = 0;  // check-ins accepted
  size_t releases = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
    Twins t;
    t.JoinAll();
    for (int op = 0; op < 120; ++op) {
      t.Tick();
      const uint64_t g = t.generation() + (pick(40) == 0 ? 1 : 0);
      const uint32_t kind = pick(10);
      if (kind < 6) {
        std::vector<RankId> ranks;
        if (consecutive) {
          const RankId first = pick(3);
          const uint32_t n = 4 + pick(4);
          for (uint32_t i = 0; i < n; ++i) ranks.push_back(first + i);
          if (pick(4) == 0) ranks[pick(n)] = pick(kWorld + 1);
        } else {
          const uint32_t n = 1 + pick(8);
          for (uint32_t i = 0; i < n; ++i) ranks.push_back(pick(kWorld + 1));
        }
        const Step step = t.merged().rank_step(pick(kWorld)) + (pick(6) == 0 ? 1 : 0);
        std::optional<uint64_t> checksum;
        if (pick(4) == 0) checksum = pick(2);
        const std::vector<std::string> statuses =
            t.Stage(Item(step, pick(3), optimizers[pick(3)], checksum), ranks, g);
        accepted += std::count(statuses.begin(), statuses.end(), kOk);
      } else if (kind < 9) {
        const RankId rank = pick(kWorld);
        const Step step = t.merged().rank_step(rank);
        const ChunkId chunk = pick(2);
        t.Both([&](JobTracker& tr, Decisions* out) {
          const SyncDoneItem item = Done(step, chunk, {{"dp", 1}});
          return tr.SyncDone(rank, g, absl::MakeConstSpan(&item, 1), t.now(), out);
        });
      } else if (pick(8) == 0) {
        const RankId rank = pick(kWorld);
        const Step step = t.merged().rank_step(rank);
        t.Both([&](JobTracker& tr, Decisions* out) {
          return tr.Skip(rank, g, step, "found_inf", t.now(), out);
        });
      }
      if (::testing::Test::HasFailure()) {
        FAIL() << "seed " << seed << " op " << op;
      }
    }
    releases += t.releases();
  }
  // The runs did more than refuse.
  printf("accepted check-ins: %d, releases by a group: %zu\n", accepted, releases);
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(releases, 30u);
}

TEST(StageMergedTest, RandomRunsMatchStageRankByRank) { RandomRunsMatchStageRankByRank(false); }

TEST(StageMergedTest, RandomConsecutiveRanksMatchStageRankByRank) {
  RandomRunsMatchStageRankByRank(true);
}

}  // namespace
}  // namespace psync::core::testing

namespace psync::core::testing {
namespace {

// StageInSlots records only the common case, creates nothing and releases nothing: every other
// rank is left, by its index, to StageMerged, and ReleaseIfReady releases once.
TEST(StageInSlotsTest, RecordsTheCommonCaseOnlyAndLeavesTheReleaseToReleaseIfReady) {
  JobTracker tracker("job", TrackerOptions());
  Decisions joins;
  for (const RankPlan& plan : Plans()) ASSERT_TRUE(tracker.Join(plan, kStart, &joins).ok());
  const uint64_t g = tracker.generation();
  // Rank 5 does not stage chunk 1; rank 2 comes twice.
  const std::vector<RankId> ranks = {0, 5, 1, 2, 2};
  std::vector<absl::Status> statuses(ranks.size(), absl::UnknownError("untouched"));
  std::vector<uint32_t> others;
  Decisions out;
  out.merge_rank_events = true;
  // A step no chunk-step exists for (no rank reached it): nothing is recorded, nothing created.
  const uint32_t steps_held = tracker.Snapshot(kStart).steps_held;
  tracker.StageInSlots(g, Item(1, 1, "dense"), ranks, kStart, &out, absl::MakeSpan(statuses),
                       &others);
  EXPECT_THAT(others, ::testing::ElementsAre(0, 1, 2, 3, 4));
  EXPECT_TRUE(out.events.empty());
  EXPECT_FALSE(tracker.OpenInSlots(g, Item(1, 1, "dense"), ranks));      // step 1 not reached
  EXPECT_FALSE(tracker.OpenInSlots(g, Item(0, 1, "dense"), {5}));        // not a contributor
  EXPECT_FALSE(tracker.OpenInSlots(g + 1, Item(0, 1, "dense"), ranks));  // not the generation
  EXPECT_EQ(tracker.Snapshot(kStart).steps_held, steps_held);
  ASSERT_TRUE(tracker.OpenInSlots(g, Item(0, 1, "dense"), ranks));
  others.clear();
  tracker.StageInSlots(g, Item(0, 1, "dense"), ranks, kStart, &out, absl::MakeSpan(statuses),
                       &others);
  EXPECT_THAT(others, ::testing::ElementsAre(1, 4));  // rank 5, and rank 2 again
  EXPECT_EQ(statuses[0], absl::OkStatus());
  EXPECT_EQ(statuses[1], absl::UnknownError("untouched"));
  EXPECT_EQ(statuses[2], absl::OkStatus());
  EXPECT_EQ(statuses[3], absl::OkStatus());
  EXPECT_EQ(statuses[4], absl::UnknownError("untouched"));
  // One record of the ranks recorded (rank 2's found again past the rank left out).
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_THAT(out.events[0].ranks, ::testing::ElementsAre(0, 1, 2));

  // The rest of chunk 1's contributors: rank 3's dense and rank 4's expert. No release yet.
  others.clear();
  const std::vector<RankId> three = {3};
  const std::vector<RankId> four = {4};
  std::vector<absl::Status> one(1);
  tracker.StageInSlots(g, Item(0, 1, "dense"), three, kStart, &out, absl::MakeSpan(one), &others);
  ASSERT_TRUE(tracker.OpenInSlots(g, Item(0, 1, "expert"), four));
  tracker.StageInSlots(g, Item(0, 1, "expert"), four, kStart, &out, absl::MakeSpan(one), &others);
  EXPECT_TRUE(others.empty());
  EXPECT_TRUE(out.deliveries.empty());
  EXPECT_EQ(tracker.ChunkAt(0, 1, kStart)->state, "WAITING");

  Decisions released;
  tracker.ReleaseIfReady(0, 1, kStart, &released);
  EXPECT_EQ(released.deliveries.size(), kWorld);
  EXPECT_EQ(tracker.ChunkAt(0, 1, kStart)->state, "RELEASED");
  Decisions again;
  tracker.ReleaseIfReady(0, 1, kStart, &again);
  EXPECT_TRUE(again.deliveries.empty());
  EXPECT_TRUE(again.events.empty());
}

// Consecutive ranks: recorded as a run when each is in the common case; a rank already in breaks
// the run, and is the only one left.
TEST(StageInSlotsTest, ConsecutiveRanksLeaveOnlyTheRankAlreadyIn) {
  JobTracker tracker("job", TrackerOptions());
  Decisions joins;
  for (const RankPlan& plan : Plans()) ASSERT_TRUE(tracker.Join(plan, kStart, &joins).ok());
  const uint64_t g = tracker.generation();
  Decisions out;
  out.merge_rank_events = true;
  std::vector<absl::Status> one(1);
  tracker.StageMerged(g, Item(0, 0, "dense"), {3}, kStart, &out, absl::MakeSpan(one));
  ASSERT_TRUE(one[0].ok());
  const std::vector<RankId> ranks = {0, 1, 2, 3, 4, 5};
  std::vector<absl::Status> statuses(ranks.size(), absl::UnknownError("untouched"));
  std::vector<uint32_t> others;
  ASSERT_TRUE(tracker.OpenInSlots(g, Item(0, 0, "dense"), ranks));
  Decisions dense;
  dense.merge_rank_events = true;
  tracker.StageInSlots(g, Item(0, 0, "dense"), ranks, kStart, &dense, absl::MakeSpan(statuses),
                       &others);
  EXPECT_THAT(others, ::testing::ElementsAre(3));
  for (size_t i = 0; i < ranks.size(); ++i) {
    EXPECT_EQ(statuses[i], i == 3 ? absl::UnknownError("untouched") : absl::OkStatus()) << i;
  }
  ASSERT_EQ(dense.events.size(), 1u);
  EXPECT_THAT(dense.events[0].ranks, ::testing::ElementsAre(0, 1, 2, 4, 5));

  // Every rank's expert: one run, nothing left, and the chunk waits for ReleaseIfReady.
  others.clear();
  Decisions expert;
  expert.merge_rank_events = true;
  ASSERT_TRUE(tracker.OpenInSlots(g, Item(0, 0, "expert"), ranks));
  tracker.StageInSlots(g, Item(0, 0, "expert"), ranks, kStart, &expert, absl::MakeSpan(statuses),
                       &others);
  EXPECT_TRUE(others.empty());
  EXPECT_THAT(statuses, ::testing::Each(absl::OkStatus()));
  ASSERT_EQ(expert.events.size(), 1u);
  EXPECT_THAT(expert.events[0].ranks, ::testing::ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_EQ(tracker.ChunkAt(0, 0, kStart)->state, "WAITING");
  EXPECT_EQ(tracker.ChunkAt(0, 0, kStart)->staged_count, 2 * kWorld);
}

}  // namespace
}  // namespace psync::core::testing
