// JobTracker scenario tests: check-ins: duplicates, conflicting duplicates, and batch validation
// (all or nothing, repeated items, bounds, unknown chunk, undeclared optimizer).
// Exact decisions (deliveries, events, sequence numbers, status codes) driven through the
// Harness of job_tracker_test_harness.h, which audits every decision with an InvariantChecker
// and asserts a refused call leaves Snapshot() and NoticesToHold() unchanged.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/invariant_checker.h"
#include "server/core/job_tracker.h"
#include "server/core/job_tracker_test_harness.h"
#include "server/core/test_util.h"

namespace psync::core::testing {
namespace {

// ---------------------------------------------------------------------------------------------
// Duplicates

TEST(JobTrackerTest, DuplicateCheckinIsAnsweredIdempotently) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense", 7)}).ok());
  const std::string before = h.State();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense", 7)}).ok());
  EXPECT_THAT(h.deliveries(), IsEmpty());
  EXPECT_THAT(h.events(), ElementsAre("duplicate g1 s0 c0 r0 dense"));
  EXPECT_EQ(h.State(), before);

  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "expert")}).ok());
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
  ASSERT_EQ(h.out().deliveries.size(), 2u);
  // After the release: duplicates, alone or with each other, release nothing again.
  for (RankId r : {0, 1}) {
    ASSERT_TRUE(h.Stage(r, {Item(0, 0, "expert")}).ok());
    EXPECT_THAT(h.deliveries(), IsEmpty());
    EXPECT_THAT(h.events(), ElementsAre(absl::StrCat("duplicate g1 s0 c0 r", r, " expert")));
  }
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "expert"), Item(0, 0, "dense")}).ok());
  EXPECT_THAT(h.deliveries(), IsEmpty());
  EXPECT_THAT(h.events(),
              ElementsAre("duplicate g1 s0 c0 r1 expert", "duplicate g1 s0 c0 r1 dense"));
  EXPECT_EQ(h.checker().releases(), 1u);
}

TEST(JobTrackerTest, MixedBatchOfDuplicatesAndFreshItemsAppliesTheFreshOnes) {
  Harness h(TwoRankPlans(), TwoRankExpected());
  h.JoinAll();
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
  ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
  ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
  EXPECT_THAT(h.events(), ElementsAre("duplicate g1 s0 c0 r0 dense", "checkin g1 s0 c0 r0 expert",
                                      "release g1 s0 c0 r0 expert seq1"));
  EXPECT_EQ(h.out().deliveries.size(), 2u);
}

TEST(JobTrackerTest, ConflictingDuplicateIsAlreadyExistsWithAViolationAndNoStateChange) {
  struct Case {
    std::optional<uint64_t> first;
    std::optional<uint64_t> second;
    std::string message;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {7, 8,
       "items[0]: step 0 chunk 0 rank 0 dense already staged with shard_checksum 0x7, now 0x8",
       "conflicting duplicate check-in: shard_checksum 0x8 after 0x7"},
      {7, std::nullopt,
       "items[0]: step 0 chunk 0 rank 0 dense already staged with shard_checksum 0x7, now none",
       "conflicting duplicate check-in: shard_checksum none after 0x7"},
      {std::nullopt, 7,
       "items[0]: step 0 chunk 0 rank 0 dense already staged with shard_checksum none, now 0x7",
       "conflicting duplicate check-in: shard_checksum 0x7 after none"},
  };
  for (bool released : {false, true}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(c.message, released ? " (after release)" : ""));
      Harness h(TwoRankPlans(), TwoRankExpected());
      h.JoinAll();
      ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense", c.first)}).ok());
      if (released) {
        ASSERT_TRUE(h.Stage(0, {Item(0, 0, "expert")}).ok());
        ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
      }
      h.ExpectRefused([&] { return h.Stage(0, {Item(0, 0, "dense", c.second)}); },
                      absl::StatusCode::kAlreadyExists, c.message);
      EXPECT_THAT(h.events(), ElementsAre("violation g1 s0 c0 r0 dense"));
      EXPECT_EQ(h.out().events[0].detail, c.detail);
      // The recorded checksum is still the first one.
      ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense", c.first)}).ok());
      EXPECT_THAT(h.events(), ElementsAre("duplicate g1 s0 c0 r0 dense"));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Batch atomicity and malformed input

TEST(JobTrackerTest, BatchWithOneBadItemAppliesNothing) {
  struct Case {
    std::string name;
    StagedItem bad;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"unknown chunk", Item(0, 1, "expert"), absl::StatusCode::kInvalidArgument,
       "items[1].chunk 1 out of range [0, 1)"},
      {"undeclared optimizer", Item(0, 0, "router"), absl::StatusCode::kInvalidArgument,
       "items[1].optimizer 'router' is not declared by rank 0 for chunk 0 (declared: "
       "[dense,expert])"},
      {"step ahead", Item(1, 0, "expert"), absl::StatusCode::kFailedPrecondition,
       "items[1].step 1: rank 0 has not finished step 0 (SyncDone missing for chunks [0])"},
      {"step far ahead", Item(2, 0, "expert"), absl::StatusCode::kOutOfRange,
       "items[1].step 2 is too far ahead: rank 0 is at step 0"},
      {"repeated item", Item(0, 0, "dense"), absl::StatusCode::kInvalidArgument,
       "items[1] repeats an earlier item (step 0 chunk 0 dense)"},
      {"conflicting duplicate", Item(0, 0, "expert", 9), absl::StatusCode::kAlreadyExists,
       "items[1]: step 0 chunk 0 rank 0 expert already staged with shard_checksum 0x5, now 0x9"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Harness h(TwoRankPlans(), TwoRankExpected());
    h.JoinAll();
    // Everything but rank 0's dense is staged: a good first item would release the chunk.
    ASSERT_TRUE(h.Stage(0, {Item(0, 0, "expert", 5)}).ok());
    ASSERT_TRUE(h.Stage(1, {Item(0, 0, "dense"), Item(0, 0, "expert")}).ok());
    h.ExpectRefused([&] { return h.Stage(0, {Item(0, 0, "dense"), c.bad}); }, c.code, c.message);
    if (c.code == absl::StatusCode::kAlreadyExists) {
      EXPECT_THAT(h.events(), ElementsAre("violation g1 s0 c0 r0 expert"));
    } else {
      EXPECT_THAT(h.events(), IsEmpty());
    }
    // The good item was not applied: it is fresh now, and releases.
    ASSERT_TRUE(h.Stage(0, {Item(0, 0, "dense")}).ok());
    EXPECT_THAT(h.events(),
                ElementsAre("checkin g1 s0 c0 r0 dense", "release g1 s0 c0 r0 dense seq1"));
  }
}

TEST(JobTrackerTest, RepeatedItemIsFoundInSmallAndLargeBatches) {
  // One rank, 20 chunks: a batch of 20 distinct valid check-ins plus one repeat is compared
  // through a hash set, a batch of 3 pairwise; both name the repeat and apply nothing.
  constexpr ChunkId kChunks = 20;
  std::vector<ChunkPart> parts;
  std::vector<ExpectedChunk> expected;
  for (ChunkId c = 0; c < kChunks; ++c) {
    parts.push_back(Part(c, {"dense"}, {Group("dp", {0})}));
    expected.push_back({{{0, "dense"}}, {0}});
  }
  Harness h({Plan(0, 1, kChunks, parts)}, expected);
  h.JoinAll();
  std::vector<StagedItem> large;
  for (ChunkId c = 0; c < kChunks; ++c) large.push_back(Item(0, c, "dense"));
  large.push_back(Item(0, 3, "dense"));
  h.ExpectRefused([&] { return h.Stage(0, large); }, absl::StatusCode::kInvalidArgument,
                  "items[20] repeats an earlier item (step 0 chunk 3 dense)");
  h.ExpectRefused(
      [&] {
        return h.Stage(0, {Item(0, 1, "dense"), Item(0, 2, "dense"), Item(0, 1, "dense")});
      },
      absl::StatusCode::kInvalidArgument,
      "items[2] repeats an earlier item (step 0 chunk 1 dense)");
  EXPECT_THAT(h.events(), IsEmpty());
  large.pop_back();
  ASSERT_TRUE(h.Stage(0, large).ok());
  EXPECT_EQ(h.deliveries().size(), kChunks);
}

TEST(JobTrackerTest, BatchSizeIsBounded) {
  TrackerOptions options;
  options.max_batch_items = 1;
  Harness h(TwoRankPlans(), TwoRankExpected(), options);
  h.JoinAll();
  h.ExpectRefused([&] { return h.Stage(0, {}); }, absl::StatusCode::kInvalidArgument,
                  "items must have 1..1 entries (got 0)");
  h.ExpectRefused(
      [&] {
        return h.Stage(0, {Item(0, 0, "dense"), Item(0, 0, "expert")});
      },
      absl::StatusCode::kInvalidArgument, "items must have 1..1 entries (got 2)");
  h.ExpectRefused([&] { return h.SyncDone(0, {}); }, absl::StatusCode::kInvalidArgument,
                  "items must have 1..1 entries (got 0)");
}

TEST(JobTrackerTest, UnknownChunkAndUndeclaredOptimizerNameTheItem) {
  struct Case {
    std::vector<StagedItem> items;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{Item(0, 3, "dense")}, "items[0].chunk 3 out of range [0, 3)"},
      {{Item(0, 1, "dense"), Item(0, 7, "dense")}, "items[1].chunk 7 out of range [0, 3)"},
      {{Item(0, 1, "expert")}, "items[0].optimizer 'expert' is not declared by rank 0 for chunk 1"},
      {{Item(0, 0, "dense"), Item(0, 2, "dense")},
       "items[1].optimizer 'dense' is not declared by rank 0 for chunk 2 (declared: [expert])"},
      {{Item(0, 0, "dense"), Item(0, 1, "dense"), Item(0, 0, "")},
       "items[2].optimizer '' is not declared"},
  };
  Harness h(MoePlans(), MoeExpected());
  h.JoinAll();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    h.ExpectRefused([&] { return h.Stage(0, c.items); }, absl::StatusCode::kInvalidArgument,
                    c.message);
  }
  h.ExpectRefused([&] { return h.SyncDone(0, {Done(0, 3)}); }, absl::StatusCode::kInvalidArgument,
                  "items[0].chunk 3 out of range [0, 3)");
}

}  // namespace
}  // namespace psync::core::testing
