// JobTracker::SyncDonesInSlots against its definition: the same SyncDone of several ranks, applied
// to one tracker as an owner applies a merged group (SyncDonesInSlots for the common reports, each
// other rank through SyncDone where it stands) and to another rank by rank with SyncDone, must give
// the same statuses, the same events in the same order, the same notices and the same state.
// Hand-made cases for each way a rank leaves the common case, then seeded random runs.
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
const std::string kOk = "OK: ";

// 6 ranks, 2 chunks. Chunk 0: every rank stages dense, all in sync group dp. Chunk 1: ranks 0-3
// stage dense; dp0 = {0, 1, 2}, dp1 = {3, 4, 5} (rank 5 a member only).
std::vector<RankPlan> Plans() {
  std::vector<RankId> all;
  for (RankId r = 0; r < kWorld; ++r) all.push_back(r);
  std::vector<RankPlan> plans;
  for (RankId r = 0; r < kWorld; ++r) {
    std::vector<std::string> chunk1;
    if (r < 4) chunk1 = {"dense"};
    const GroupDecl half = r < 3 ? Group("dp0", {0, 1, 2}) : Group("dp1", {3, 4, 5});
    plans.push_back(
        Plan(r, kWorld, 2, {Part(0, {"dense"}, {Group("dp", all)}), Part(1, chunk1, {half})}));
  }
  return plans;
}

// Two trackers fed the same inputs: `merged` takes SyncDone groups as an owner applies them,
// `single` rank by rank through SyncDone. Outputs compare in order.
class Twins {
 public:
  Twins() : twins_(TwinTrackers::Order::kExact, kStart) {}

  void JoinAll() { twins_.JoinAll(Plans()); }
  uint64_t generation() { return twins_.single().generation(); }

  // The group on both; returns the statuses (equal on both, or the test fails). *common gets how
  // many ranks SyncDonesInSlots recorded.
  std::vector<std::string> SyncDone(const SyncDoneItem& item, const std::vector<RankId>& ranks,
                                    uint64_t generation, size_t* common = nullptr) {
    Decisions a, b;
    const absl::Time now = twins_.now();
    std::vector<std::string> grouped(ranks.size());
    size_t recorded_in_slots = 0;
    for (size_t k = 0; k < ranks.size();) {
      const size_t recorded = twins_.grouped().SyncDonesInSlots(
          generation, item, absl::MakeConstSpan(ranks).subspan(k), now, &a);
      recorded_in_slots += recorded;
      for (size_t i = k; i < k + recorded; ++i) grouped[i] = kOk;
      k += recorded;
      if (k < ranks.size()) {
        grouped[k] = StatusText(twins_.grouped().SyncDone(ranks[k], generation,
                                                          absl::MakeConstSpan(&item, 1), now, &a));
        ++k;
      }
    }
    std::vector<std::string> one_by_one;
    for (const RankId rank : ranks) {
      one_by_one.push_back(StatusText(
          twins_.single().SyncDone(rank, generation, absl::MakeConstSpan(&item, 1), now, &b)));
    }
    EXPECT_EQ(grouped, one_by_one);
    twins_.ExpectSameOutput(a, b);
    if (common != nullptr) *common = recorded_in_slots;
    return grouped;
  }
  // Any other input, on both.
  template <typename Fn>
  std::string Both(Fn fn) {
    return twins_.Both(fn);
  }
  // Every rank stages (step, chunk): the chunk is released.
  void Release(Step step, ChunkId chunk) {
    for (RankId r = 0; r < (chunk == 0 ? kWorld : 4); ++r) {
      Both([&](JobTracker& t, Decisions* out) {
        const StagedItem item = Item(step, chunk, "dense");
        return t.Stage(r, generation(), absl::MakeConstSpan(&item, 1), twins_.now(), out);
      });
    }
  }
  Step RankStep(RankId rank) { return twins_.grouped().rank_step(rank); }

 private:
  TwinTrackers twins_;
};

TEST(SyncDonesInSlotsTest, TheCommonReportsCompleteTheSyncAndMoveEveryRankOn) {
  Twins t;
  t.JoinAll();
  t.Release(0, 0);
  t.Release(0, 1);
  size_t common = 0;
  EXPECT_THAT(t.SyncDone(Done(0, 1, {{"dp0", 7}}), {0, 1, 2}, t.generation(), &common),
              ::testing::Each(kOk));
  EXPECT_EQ(common, 3u);
  EXPECT_THAT(t.SyncDone(Done(0, 1, {{"dp1", 8}}), {3, 4, 5}, t.generation(), &common),
              ::testing::Each(kOk));
  EXPECT_EQ(common, 3u);
  EXPECT_EQ(t.RankStep(0), 0u);
  // Chunk 0's reports finish every rank's step 0 (each moves on within the group) and the sync.
  EXPECT_THAT(t.SyncDone(Done(0, 0, {{"dp", 9}}), {5, 4, 3, 2, 1, 0}, t.generation(), &common),
              ::testing::Each(kOk));
  EXPECT_EQ(common, 6u);
  for (RankId r = 0; r < kWorld; ++r) EXPECT_EQ(t.RankStep(r), 1u) << r;
}

TEST(SyncDonesInSlotsTest, EachWayOutOfTheCommonCaseAnswersAsSyncDone) {
  Twins t;
  t.JoinAll();
  const uint64_t g = t.generation();
  // Chunk 1 is not released: every report is an early sync (a violation), rank 9 has not joined.
  const std::vector<std::string> early = t.SyncDone(Done(0, 1, {{"dp0", 1}}), {0, 9}, g);
  EXPECT_THAT(early[0], ::testing::StartsWith("FAILED_PRECONDITION: items[0]: SyncDone before"));
  EXPECT_EQ(early[1], "FAILED_PRECONDITION: rank 9 has not joined generation 1");
  t.Release(0, 1);
  size_t common = 0;
  // A repeat of rank 0 (a duplicate, OK), the group of another half (rank 3 is in dp1), a rank
  // reporting again, between common reports.
  const std::vector<std::string> mixed =
      t.SyncDone(Done(0, 1, {{"dp0", 1}}), {0, 0, 3, 1, 1, 2}, g, &common);
  EXPECT_EQ(common, 3u);  // ranks 0, 1, 2 the first time
  EXPECT_EQ(mixed[0], kOk);
  EXPECT_EQ(mixed[1], kOk);
  EXPECT_THAT(mixed[2], ::testing::StartsWith("INVALID_ARGUMENT: items[0].checksums[0].group"));
  EXPECT_EQ(mixed[3], kOk);
  EXPECT_EQ(mixed[4], kOk);
  EXPECT_EQ(mixed[5], kOk);
  // Another checksum after the first: a conflicting duplicate; no checksum: the common case.
  EXPECT_THAT(t.SyncDone(Done(0, 1, {{"dp1", 5}}), {3, 3}, g), ::testing::ElementsAre(kOk, kOk));
  EXPECT_THAT(t.SyncDone(Done(0, 1, {{"dp1", 6}}), {4, 3}, g),
              ::testing::ElementsAre(kOk, ::testing::StartsWith("ALREADY_EXISTS")));
  EXPECT_THAT(t.SyncDone(Done(0, 1), {5}, g, &common), ::testing::ElementsAre(kOk));
  EXPECT_EQ(common, 1u);
  // Another generation, a chunk out of range, two checksums.
  EXPECT_THAT(t.SyncDone(Done(0, 0, {{"dp", 1}}), {0, 1}, g + 1),
              ::testing::Each(::testing::StartsWith("FAILED_PRECONDITION")));
  EXPECT_THAT(t.SyncDone(Done(0, 2), {0}, g)[0], ::testing::StartsWith("INVALID_ARGUMENT"));
  t.Release(0, 0);
  EXPECT_THAT(t.SyncDone(Done(0, 0, {{"dp", 1}, {"dp", 1}}), {0}, g)[0],
              ::testing::StartsWith("INVALID_ARGUMENT"));
}

TEST(SyncDonesInSlotsTest, AMismatchedChecksumIsReportedOnceTheGroupCompletes) {
  Twins t;
  t.JoinAll();
  const uint64_t g = t.generation();
  t.Release(0, 0);
  t.SyncDone(Done(0, 0, {{"dp", 1}}), {0, 1, 2}, g);
  // The last report completes the sync and the audit names the disagreeing ranks (same output on
  // both trackers, compared by Twins).
  t.SyncDone(Done(0, 0, {{"dp", 2}}), {3, 4, 5}, g);
}

// Seeded runs: groups of random ranks (repeats included) reporting a random step's chunk with a
// random group's checksum, released or not, between random check-ins that release chunks.
TEST(SyncDonesInSlotsTest, RandomGroupsAnswerAsSyncDoneOneByOne) {
  size_t common = 0;
  size_t other = 0;
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    Twins t;
    t.JoinAll();
    std::mt19937 rng(seed);
    const auto uniform = [&rng](size_t n) {
      return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
    };
    const char* const groups[] = {"dp", "dp0", "dp1", "tp"};
    for (int round = 0; round < 60; ++round) {
      const Step step = t.RankStep(static_cast<RankId>(uniform(kWorld))) + (uniform(5) == 0);
      const ChunkId chunk = static_cast<ChunkId>(uniform(2));
      if (uniform(3) == 0) {  // every contributor stages: mostly a release
        t.Release(step, chunk);
        continue;
      }
      std::vector<RankId> ranks(1 + uniform(kWorld));
      for (RankId& r : ranks) r = static_cast<RankId>(uniform(kWorld));
      SyncDoneItem item = Done(step, chunk);
      // Mostly the first rank's own group, else any (a foreign one for some ranks), or none.
      const char* const own = chunk == 0 ? "dp" : (ranks[0] < 3 ? "dp0" : "dp1");
      switch (uniform(4)) {
        case 0:
          break;
        case 1:
          item.checksums.push_back({groups[uniform(4)], uniform(2)});
          break;
        default:
          item.checksums.push_back({own, uniform(2)});
      }
      size_t in_slots = 0;
      const std::vector<std::string> statuses = t.SyncDone(item, ranks, t.generation(), &in_slots);
      common += in_slots;
      other += ranks.size() - in_slots;
      if (::testing::Test::HasFailure()) {
        FAIL() << "seed " << seed << " round " << round;
      }
    }
  }
  // Both ways were taken, many times.
  EXPECT_GT(common, 300u);
  EXPECT_GT(other, 300u);
}

}  // namespace
}  // namespace psync::core::testing
