// Exact decisions of the release rule (release_rule.h), on hand-built chunk state: no early
// release, exactly once, never without contributors, synced before a restart, incomplete plan,
// and the invariant the size comparison relies on.
#include "server/core/release_rule.h"

#include <string>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace psync::core {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1700000000);

// A complete plan's chunk: "dense" and "expert" on ranks 0 and 1 (4 contributors), dp = [0, 1].
ChunkInfo TwoRankChunk(bool with_contributors = true) {
  absl::btree_set<Contributor> contributors;
  if (with_contributors) contributors = {{0, "dense"}, {0, "expert"}, {1, "dense"}, {1, "expert"}};
  ChunkInfo info;
  info.groups = {{"dp", {0, 1}}};
  info.members = {0, 1};
  info.slots = ChunkSlots(contributors, info.members, info.groups);
  info.complete = true;
  return info;
}

// A chunk-step whose staged set is kept in `info`'s slots (or keyed, started while forming).
struct Fixture {
  explicit Fixture(bool with_contributors = true, bool slotted = true)
      : info(TwoRankChunk(with_contributors)) {
    cs.staged.Init(&ids, slotted ? &info.slots : nullptr);
    cs.done.Init(slotted ? &info.slots : nullptr);
  }
  void Stage(RankId rank, const std::string& optimizer) {
    cs.staged.Insert({rank, optimizer}, StagedMark(std::nullopt, kNow));
  }
  void StageAll() {
    for (RankId r : {0, 1}) {
      Stage(r, "dense");
      Stage(r, "expert");
    }
  }
  ReleaseDecision Decide(bool plan_complete = true) const {
    return DecideRelease(plan_complete, info, cs);
  }

  OptimizerIds ids;
  ChunkInfo info;
  ChunkStep cs;
};

TEST(ReleaseRuleTest, NoReleaseWhileOneContributorIsMissing) {
  Fixture f;
  f.Stage(0, "dense");
  f.Stage(0, "expert");
  f.Stage(1, "dense");
  const ReleaseDecision d = f.Decide();
  EXPECT_EQ(d.verdict, ReleaseVerdict::kWaiting);
  EXPECT_FALSE(d.release());
  EXPECT_EQ(d.Reason(), "waiting: 3 of 4 contributors staged");

  f.Stage(1, "expert");
  const ReleaseDecision all = f.Decide();
  EXPECT_EQ(all.verdict, ReleaseVerdict::kAllStaged);
  EXPECT_TRUE(all.release());
  EXPECT_EQ(all.Reason(), "release: all 4 contributors staged");
}

TEST(ReleaseRuleTest, ReleasedOnce) {
  Fixture f;
  f.StageAll();
  ASSERT_TRUE(f.Decide().release());
  f.cs.released = true;
  const ReleaseDecision d = f.Decide();
  EXPECT_EQ(d.verdict, ReleaseVerdict::kAlreadyReleased);
  EXPECT_FALSE(d.release());
  f.cs.synced_before = true;  // a late re-announcement does not release it again
  EXPECT_EQ(f.Decide().verdict, ReleaseVerdict::kAlreadyReleased);
}

TEST(ReleaseRuleTest, ChunkWithoutContributorsIsNeverReleased) {
  Fixture f(/*with_contributors=*/false);
  EXPECT_EQ(f.Decide().verdict, ReleaseVerdict::kNoContributors);
  f.cs.synced_before = true;
  const ReleaseDecision d = f.Decide();
  EXPECT_EQ(d.verdict, ReleaseVerdict::kNoContributors);
  EXPECT_FALSE(d.release());
  EXPECT_EQ(d.Reason(), "never released: the chunk has no declared contributors");
}

TEST(ReleaseRuleTest, SyncedBeforeARestartIsReleasedWhateverWasStaged) {
  Fixture f;
  f.Stage(1, "dense");
  f.cs.synced_before = true;
  const ReleaseDecision d = f.Decide();
  EXPECT_EQ(d.verdict, ReleaseVerdict::kSyncedBefore);
  EXPECT_TRUE(d.release());
}

TEST(ReleaseRuleTest, IncompletePlanHoldsEvenAFullChunk) {
  Fixture f;
  f.StageAll();
  f.cs.synced_before = true;
  const ReleaseDecision d = f.Decide(/*plan_complete=*/false);
  EXPECT_EQ(d.verdict, ReleaseVerdict::kPlanIncomplete);
  EXPECT_FALSE(d.release());
}

TEST(ReleaseRuleTest, UndeclaredContributorInStagedIsCaughtNotCounted) {
  // Three declared contributors and one undeclared: sizes match, yet rank 1 expert is missing.
  for (const bool slotted : {true, false}) {
    SCOPED_TRACE(slotted ? "kept in slots" : "keyed (started while forming)");
    Fixture f(/*with_contributors=*/true, slotted);
    f.Stage(0, "dense");
    f.Stage(0, "expert");
    f.Stage(1, "dense");
    f.Stage(7, "dense");
    ASSERT_EQ(f.cs.staged.size(), 4u);
    const ReleaseDecision d = f.Decide();
    EXPECT_EQ(d.verdict, ReleaseVerdict::kUndeclaredStaged);
    EXPECT_FALSE(d.release());
    ASSERT_TRUE(d.undeclared.has_value());
    EXPECT_EQ(*d.undeclared, (Contributor{7, "dense"}));
    EXPECT_EQ(d.Reason(),
              "not released: internal invariant broken: 4 staged for 4 declared contributors, "
              "rank 7 dense is not declared");
  }
}

TEST(ReleaseRuleTest, FirstUndeclaredAcceptsDeclaredContributorsEitherWay) {
  for (const bool slotted : {true, false}) {
    Fixture f(/*with_contributors=*/true, slotted);
    f.StageAll();
    EXPECT_FALSE(FirstUndeclared(f.cs.staged, f.info.slots).has_value());
    EXPECT_EQ(f.Decide().verdict, ReleaseVerdict::kAllStaged);
  }
}

}  // namespace
}  // namespace psync::core
