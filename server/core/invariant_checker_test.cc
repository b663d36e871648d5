// The checker must catch each violation it claims to catch: these tests feed it hand-built
// decisions, never a JobTracker.
#include "server/core/invariant_checker.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::core {
namespace {

using ::testing::HasSubstr;

// Chunk 0: contributors 0/dense, 1/dense, members 0,1. Chunk 1: contributor 0/expert, members
// 0,2. Chunk 2: no contributors.
InvariantChecker MakeChecker() {
  return InvariantChecker({
      {{{1, "dense"}, {0, "dense"}}, {1, 0}},
      {{{0, "expert"}}, {0, 2}},
      {{}, {0, 1, 2}},
  });
}

Event Release(uint64_t generation, Step step, ChunkId chunk, uint64_t sequence) {
  Event e;
  e.kind = EventKind::kRelease;
  e.generation = generation;
  e.step = step;
  e.chunk = chunk;
  e.sequence = sequence;
  return e;
}

Delivery Directive(RankId rank, uint64_t generation, Step step, ChunkId chunk, uint64_t sequence) {
  SyncDirective d;
  d.generation = generation;
  d.step = step;
  d.chunk = chunk;
  d.sequence = sequence;
  return Delivery{rank, d};
}

// A well-formed release of chunk 0 at `step`: event plus directives to ranks 0 and 1.
Decisions ReleaseChunk0(uint64_t generation, Step step, uint64_t sequence) {
  Decisions d;
  d.deliveries = {Directive(0, generation, step, 0, sequence),
                  Directive(1, generation, step, 0, sequence)};
  d.events = {Release(generation, step, 0, sequence)};
  return d;
}

void StageChunk0(InvariantChecker& checker, uint64_t generation, Step step) {
  checker.OnStaged(0, generation, {StagedItem{step, 0, "dense", std::nullopt}});
  checker.OnStaged(1, generation, {StagedItem{step, 0, "dense", std::nullopt}});
}

void ExpectViolation(const absl::Status& status, const std::string& text) {
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(text));
}

TEST(InvariantCheckerTest, AcceptsACorrectRun) {
  InvariantChecker checker = MakeChecker();
  StageChunk0(checker, 1, 0);
  EXPECT_TRUE(checker.OnDecisions(ReleaseChunk0(1, 0, 1)).ok());
  checker.OnStaged(0, 1, {StagedItem{0, 1, "expert", 7}});
  Decisions d;
  d.deliveries = {Directive(0, 1, 0, 1, 2), Directive(2, 1, 0, 1, 2)};
  d.events = {Release(1, 0, 1, 2)};
  EXPECT_TRUE(checker.OnDecisions(d).ok());
  // Step 1 skipped by every rank.
  Decisions skipped;
  for (RankId r : {0, 1, 2}) skipped.deliveries.push_back({r, StepSkipped{1, 1}});
  EXPECT_TRUE(checker.OnDecisions(skipped).ok());
  const std::vector<Step> steps = {0, 1};
  const std::vector<Step> skips = {1};
  EXPECT_TRUE(checker.CheckComplete(1, steps, skips).ok());
  EXPECT_EQ(checker.releases(), 2u);
}

TEST(InvariantCheckerTest, CatchesEarlyReleaseNamingTheMissingContributor) {
  InvariantChecker checker = MakeChecker();
  checker.OnStaged(0, 1, {StagedItem{0, 0, "dense", std::nullopt}});
  ExpectViolation(checker.OnDecisions(ReleaseChunk0(1, 0, 1)),
                  "early release of generation 1 step 0 chunk 0 (sequence 1): no accepted "
                  "check-in from rank 1 dense");
  // Sticky: a later correct input still reports the first violation.
  ExpectViolation(checker.OnDecisions(Decisions{}), "early release");
}

TEST(InvariantCheckerTest, CheckInsOfAnotherGenerationOrStepDoNotCount) {
  InvariantChecker checker = MakeChecker();
  StageChunk0(checker, 1, 0);
  ExpectViolation(checker.OnDecisions(ReleaseChunk0(2, 0, 1)), "early release of generation 2");
  InvariantChecker other = MakeChecker();
  StageChunk0(other, 1, 0);
  ExpectViolation(other.OnDecisions(ReleaseChunk0(1, 1, 1)),
                  "early release of generation 1 step 1");
}

TEST(InvariantCheckerTest, CatchesDirectiveWithoutRelease) {
  InvariantChecker checker = MakeChecker();
  StageChunk0(checker, 1, 0);
  Decisions d;
  d.deliveries = {Directive(0, 1, 0, 0, 1)};
  ExpectViolation(
      checker.OnDecisions(d),
      "SyncDirective for generation 1 step 0 chunk 0 to rank 0 without a release event");
}

TEST(InvariantCheckerTest, CatchesSecondRelease) {
  InvariantChecker checker = MakeChecker();
  StageChunk0(checker, 1, 0);
  ASSERT_TRUE(checker.OnDecisions(ReleaseChunk0(1, 0, 1)).ok());
  Decisions again;
  again.events = {Release(1, 0, 0, 2)};
  ExpectViolation(checker.OnDecisions(again),
                  "second release of generation 1 step 0 chunk 0: sequence 2 after sequence 1");
}

TEST(InvariantCheckerTest, CatchesDuplicateDeliveryToAMember) {
  InvariantChecker checker = MakeChecker();
  StageChunk0(checker, 1, 0);
  Decisions d = ReleaseChunk0(1, 0, 1);
  d.deliveries.push_back(Directive(1, 1, 0, 0, 1));
  ExpectViolation(checker.OnDecisions(d),
                  "SyncDirective for generation 1 step 0 chunk 0 sent to rank 1 twice");
}

TEST(InvariantCheckerTest, CatchesDuplicateDeliveryInALaterDecisions) {
  InvariantChecker checker = MakeChecker();
  StageChunk0(checker, 1, 0);
  ASSERT_TRUE(checker.OnDecisions(ReleaseChunk0(1, 0, 1)).ok());
  Decisions d;
  d.deliveries = {Directive(0, 1, 0, 0, 1)};
  ExpectViolation(checker.OnDecisions(d), "sent to rank 0 twice");
}

TEST(InvariantCheckerTest, CatchesDeliveryToANonMember) {
  InvariantChecker checker = MakeChecker();
  StageChunk0(checker, 1, 0);
  Decisions d = ReleaseChunk0(1, 0, 1);
  d.deliveries.push_back(Directive(2, 1, 0, 0, 1));
  ExpectViolation(checker.OnDecisions(d),
                  "SyncDirective for generation 1 step 0 chunk 0 sent to rank 2, not a member of "
                  "the chunk [0,1]");
}

TEST(InvariantCheckerTest, CatchesDirectiveWithAnotherSequence) {
  InvariantChecker checker = MakeChecker();
  StageChunk0(checker, 1, 0);
  Decisions d = ReleaseChunk0(1, 0, 4);
  d.deliveries[1] = Directive(1, 1, 0, 0, 5);
  ExpectViolation(checker.OnDecisions(d), "to rank 1 has sequence 5, the release has 4");
}

TEST(InvariantCheckerTest, CatchesSequenceNotIncreasing) {
  InvariantChecker checker = MakeChecker();
  StageChunk0(checker, 1, 0);
  StageChunk0(checker, 1, 1);
  ASSERT_TRUE(checker.OnDecisions(ReleaseChunk0(1, 0, 3)).ok());
  ExpectViolation(checker.OnDecisions(ReleaseChunk0(1, 1, 3)),
                  "release of generation 1 step 1 chunk 0 has sequence 3, not above the previous "
                  "release's 3");
}

TEST(InvariantCheckerTest, SequencesIncreaseAcrossGenerations) {
  InvariantChecker checker = MakeChecker();
  StageChunk0(checker, 1, 0);
  StageChunk0(checker, 2, 0);
  ASSERT_TRUE(checker.OnDecisions(ReleaseChunk0(1, 0, 5)).ok());
  ExpectViolation(checker.OnDecisions(ReleaseChunk0(2, 0, 2)),
                  "not above the previous release's 5");
}

TEST(InvariantCheckerTest, CatchesReleaseOfChunkWithoutContributors) {
  InvariantChecker checker = MakeChecker();
  Decisions d;
  d.events = {Release(1, 0, 2, 1)};
  ExpectViolation(checker.OnDecisions(d),
                  "release of generation 1 step 0 chunk 2: the chunk has no contributors");
  InvariantChecker other = MakeChecker();
  d.events = {Release(1, 0, 9, 1)};
  ExpectViolation(other.OnDecisions(d),
                  "release of generation 1 step 0 chunk 9: the plan has 3 chunks");
}

TEST(InvariantCheckerTest, CatchesReleaseOfASkippedStep) {
  InvariantChecker checker = MakeChecker();
  StageChunk0(checker, 1, 0);
  Decisions skipped;
  skipped.deliveries = {{0, StepSkipped{1, 0}}};
  ASSERT_TRUE(checker.OnDecisions(skipped).ok());
  ExpectViolation(checker.OnDecisions(ReleaseChunk0(1, 0, 1)), "a step every rank skipped");

  InvariantChecker late = MakeChecker();
  StageChunk0(late, 1, 0);
  ASSERT_TRUE(late.OnDecisions(ReleaseChunk0(1, 0, 1)).ok());
  ExpectViolation(late.OnDecisions(skipped),
                  "step 0 of generation 1 was skipped after chunk 0 was released");
}

// A directive to a chunk's members as a whole counts as one to each expected member: a second one
// (or one to a member by itself) is a second delivery, and one addressed to another chunk's members
// is caught.
TEST(InvariantCheckerTest, ADirectiveToTheMembersAsAWholeReachesEachMemberOnce) {
  const std::vector<Step> steps = {0};
  auto whole = [](ChunkId members_of, ChunkId chunk) {
    Delivery d = Directive(0, 1, 0, chunk, 1);
    d.members_of = members_of;
    return d;
  };
  // Chunk 0 staged and released, its directive addressed to `members_of`'s members as a whole.
  auto released = [&](InvariantChecker& checker, ChunkId members_of) {
    StageChunk0(checker, 1, 0);
    Decisions d;
    d.deliveries = {whole(members_of, 0)};
    d.events = {Release(1, 0, 0, 1)};
    return checker.OnDecisions(d);
  };
  {
    InvariantChecker checker = MakeChecker();
    ASSERT_TRUE(released(checker, 0).ok());
    // Chunk 0 reached both its members: the first thing missing is chunk 1's release.
    ExpectViolation(checker.CheckComplete(1, steps, {}),
                    "generation 1 step 0 chunk 1 was never released");
  }
  {
    InvariantChecker checker = MakeChecker();
    ASSERT_TRUE(released(checker, 0).ok());
    Decisions again;
    again.deliveries = {Directive(1, 1, 0, 0, 1)};
    ExpectViolation(checker.OnDecisions(again), "sent to rank 1 twice");
  }
  {
    InvariantChecker checker = MakeChecker();
    ExpectViolation(released(checker, 1),
                    "a directive of chunk 0 was addressed to the members of chunk 1");
  }
}

TEST(InvariantCheckerTest, CheckCompleteCatchesMissingReleaseAndDelivery) {
  const std::vector<Step> steps = {0};
  {
    InvariantChecker checker = MakeChecker();
    ExpectViolation(checker.CheckComplete(1, steps, {}),
                    "generation 1 step 0 chunk 0 was never released");
  }
  {
    InvariantChecker checker = MakeChecker();
    StageChunk0(checker, 1, 0);
    checker.OnStaged(0, 1, {StagedItem{0, 1, "expert", std::nullopt}});
    Decisions d = ReleaseChunk0(1, 0, 1);
    d.deliveries.push_back(Directive(0, 1, 0, 1, 2));
    d.events.push_back(Release(1, 0, 1, 2));
    ASSERT_TRUE(checker.OnDecisions(d).ok());
    ExpectViolation(checker.CheckComplete(1, steps, {}),
                    "generation 1 step 0 chunk 1 (sequence 2): no SyncDirective delivered to "
                    "ranks [2]");
    // Another generation was not released at all.
    InvariantChecker fresh = MakeChecker();
    EXPECT_FALSE(fresh.CheckComplete(2, steps, {}).ok());
  }
  {
    InvariantChecker checker = MakeChecker();
    StageChunk0(checker, 1, 0);
    ASSERT_TRUE(checker.OnDecisions(ReleaseChunk0(1, 0, 1)).ok());
    const std::vector<Step> skips = {0};
    ExpectViolation(checker.CheckComplete(1, steps, skips),
                    "skipped step 0 of generation 1 has a release of chunk 0");
  }
}

TEST(InvariantCheckerTest, RejectsMalformedExpectedPlan) {
  InvariantChecker checker({{{{0, "dense"}, {0, "dense"}}, {0}}});
  const absl::Status status = checker.OnDecisions(Decisions{});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("expected chunk 0"));
}

}  // namespace
}  // namespace psync::core
