#include "server/core/plan.h"

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/test_util.h"

namespace psync::core {
namespace {

using ::psync::core::testing::Group;
using ::psync::core::testing::Part;
using ::psync::core::testing::Plan;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---------------------------------------------------------------------------------------------
// ValidateRankPlan

PlanLimits SmallLimits() {
  PlanLimits limits;
  limits.max_world_size = 8;
  limits.max_chunks = 4;
  limits.max_optimizers_per_chunk = 2;
  limits.max_groups_per_chunk = 2;
  limits.max_id_length = 10;
  limits.max_name_length = 6;
  return limits;
}

// Rank 1 of a W=4 job with 2 chunks: chunk 0 mixed (dp + its expert group), chunk 1 dense-only.
RankPlan ValidPlan() {
  return Plan(1, 4, 2,
              {Part(0, {"dense", "expert"}, {Group("dp", {0, 1, 2, 3}), Group("edp1", {1, 3})}),
               Part(1, {"dense"}, {Group("dp", {3, 2, 1, 0})})});
}

// The proto's ranges hold whatever the coordinator's limits are raised to.
TEST(ValidateRankPlanTest, TheProtocolsRangesBindEvenPastRaisedLimits) {
  PlanLimits raised;
  raised.max_world_size = UINT32_MAX;
  raised.max_chunks = UINT32_MAX;
  RankPlan plan = ValidPlan();
  plan.world_size = kMaxWorldSize;
  EXPECT_TRUE(ValidateRankPlan(plan, raised).ok());
  plan.world_size = kMaxWorldSize + 1;
  absl::Status status = ValidateRankPlan(plan, raised);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "world_size 1048577 out of range [1, 1048576]");
  plan = ValidPlan();
  plan.num_chunks = kMaxChunks + 1;
  status = ValidateRankPlan(plan, raised);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "num_chunks 4097 out of range [1, 4096]");
}

TEST(ValidateRankPlanTest, AcceptsValidPlans) {
  const PlanLimits limits = SmallLimits();
  EXPECT_TRUE(ValidateRankPlan(ValidPlan(), limits).ok());

  RankPlan no_chunks = ValidPlan();
  no_chunks.chunks.clear();
  const absl::Status empty = ValidateRankPlan(no_chunks, limits);
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.message(), "chunks must list at least one chunk the rank takes part in");

  RankPlan member_only = ValidPlan();
  member_only.chunks[1].optimizers.clear();  // contributes nothing to chunk 1, still syncs it
  EXPECT_TRUE(ValidateRankPlan(member_only, limits).ok());

  RankPlan at_limits = ValidPlan();
  at_limits.world_size = 8;
  at_limits.rank = 7;
  at_limits.num_chunks = 4;
  at_limits.job_id = std::string(10, 'j');
  at_limits.incarnation = std::string(10, 'i');
  at_limits.chunks = {Part(3, {"dense6", "expert"}, {Group("dp", {7}), Group("edp777", {7, 0})})};
  EXPECT_TRUE(ValidateRankPlan(at_limits, limits).ok()) << ValidateRankPlan(at_limits, limits);

  RankPlan named = ValidPlan();
  named.node = std::string(127, 'n') + "/";  // 128 characters, each allowed
  EXPECT_TRUE(ValidateRankPlan(named, limits).ok());
  named.node = "gke-a100.pool-1_x:7@z";
  EXPECT_TRUE(ValidateRankPlan(named, limits).ok());

  RankPlan single = Plan(0, 1, 1, {Part(0, {"dense"}, {Group("dp", {0})})});
  EXPECT_TRUE(ValidateRankPlan(single, limits).ok());
}

struct RejectCase {
  std::string name;
  std::function<void(RankPlan&)> mutate;
  std::string field;  // the message starts with "<field> "
  std::string problem;
};

TEST(ValidateRankPlanTest, RejectsEachFieldWithInvalidArgumentNamingIt) {
  const std::vector<RejectCase> cases = {
      {"empty job_id", [](RankPlan& p) { p.job_id = ""; }, "job_id", "must be 1..10 characters"},
      {"long job_id", [](RankPlan& p) { p.job_id = std::string(11, 'j'); }, "job_id", "(got 11)"},
      {"world_size 0", [](RankPlan& p) { p.world_size = 0; }, "world_size",
       "must be at least 1 (got 0)"},
      {"rank == world_size", [](RankPlan& p) { p.rank = 4; }, "rank", "4 out of range [0, 4)"},
      {"num_chunks 0", [](RankPlan& p) { p.num_chunks = 0; }, "num_chunks",
       "must be at least 1 (got 0)"},
      {"empty incarnation", [](RankPlan& p) { p.incarnation = ""; }, "incarnation",
       "must be 1..10 characters"},
      {"long incarnation", [](RankPlan& p) { p.incarnation = std::string(11, 'i'); }, "incarnation",
       "(got 11)"},
      {"long node", [](RankPlan& p) { p.node = std::string(129, 'n'); }, "node",
       "must be at most 128 characters (got 129)"},
      {"node with a space", [](RankPlan& p) { p.node = "gpu 7"; }, "node",
       "character 3 is not a letter, a digit or one of \"._-:@/\""},
      {"chunk out of range", [](RankPlan& p) { p.chunks[1].chunk = 2; }, "chunks[1].chunk",
       "2 out of range [0, 2)"},
      {"chunk listed twice", [](RankPlan& p) { p.chunks[1].chunk = 0; }, "chunks[1].chunk",
       "0 is listed twice"},
      {"too many optimizers",
       [](RankPlan& p) {
         p.chunks[0].optimizers = {"a", "b", "c"};
       },
       "chunks[0].optimizers", "has 3 entries (at most 2)"},
      {"empty optimizer name", [](RankPlan& p) { p.chunks[0].optimizers[1] = ""; },
       "chunks[0].optimizers[1]", "must be 1..6 characters"},
      {"long optimizer name", [](RankPlan& p) { p.chunks[1].optimizers[0] = "dense77"; },
       "chunks[1].optimizers[0]", "(got 7)"},
      {"optimizer listed twice", [](RankPlan& p) { p.chunks[0].optimizers[1] = "dense"; },
       "chunks[0].optimizers[1]", "'dense' is listed twice"},
      {"no groups", [](RankPlan& p) { p.chunks[1].groups.clear(); }, "chunks[1].groups",
       "must have 1..2 entries (got 0)"},
      {"too many groups", [](RankPlan& p) { p.chunks[0].groups.push_back(Group("x", {1})); },
       "chunks[0].groups", "(got 3)"},
      {"empty group name", [](RankPlan& p) { p.chunks[0].groups[1].name = ""; },
       "chunks[0].groups[1].name", "must be 1..6 characters"},
      {"long group name", [](RankPlan& p) { p.chunks[0].groups[1].name = "edp1234"; },
       "chunks[0].groups[1].name", "(got 7)"},
      {"group name listed twice", [](RankPlan& p) { p.chunks[0].groups[1].name = "dp"; },
       "chunks[0].groups[1].name", "'dp' is listed twice"},
      {"group rank out of range",
       [](RankPlan& p) {
         p.chunks[1].groups[0].ranks = {1, 4};
       },
       "chunks[1].groups[0].ranks", "rank 4 out of range [0, 4)"},
      {"group rank listed twice",
       [](RankPlan& p) {
         p.chunks[0].groups[1].ranks = {1, 3, 1};
       },
       "chunks[0].groups[1].ranks", "rank 1 is listed twice"},
      {"group rank listed twice in order",
       [](RankPlan& p) {
         p.chunks[1].groups[0].ranks = {0, 1, 1, 2};
       },
       "chunks[1].groups[0].ranks", "rank 1 is listed twice"},
      {"group rank out of range after a repeat-free unsorted start",
       [](RankPlan& p) {
         p.chunks[1].groups[0].ranks = {3, 1, 5, 5};
       },
       "chunks[1].groups[0].ranks", "rank 5 out of range [0, 4)"},
      {"group without the declaring rank",
       [](RankPlan& p) {
         p.chunks[0].groups[1].ranks = {0, 2};
       },
       "chunks[0].groups[1].ranks", "must include the declaring rank 1"},
      {"empty group", [](RankPlan& p) { p.chunks[1].groups[0].ranks.clear(); },
       "chunks[1].groups[0].ranks", "must include the declaring rank 1"},
  };
  const PlanLimits limits = SmallLimits();
  for (const RejectCase& c : cases) {
    SCOPED_TRACE(c.name);
    RankPlan plan = ValidPlan();
    c.mutate(plan);
    const absl::Status status = ValidateRankPlan(plan, limits);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), StartsWith(c.field + " "));
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.problem));
  }
}

// A well-formed plan larger than this coordinator takes: RESOURCE_EXHAUSTED naming the field and
// the flag's limit (the proto's "coordinator limits").
TEST(ValidateRankPlanTest, CoordinatorLimitsAreResourceExhaustedNamingFieldAndLimit) {
  const PlanLimits limits = SmallLimits();
  RankPlan wide = ValidPlan();
  wide.world_size = 9;
  EXPECT_EQ(
      ValidateRankPlan(wide, limits),
      absl::ResourceExhaustedError("world_size 9 exceeds this coordinator's max_world_size=8"));
  RankPlan deep = ValidPlan();
  deep.num_chunks = 5;
  EXPECT_EQ(ValidateRankPlan(deep, limits),
            absl::ResourceExhaustedError("num_chunks 5 exceeds this coordinator's max_chunks=4"));
  // At the limits: accepted.
  wide.world_size = 8;
  EXPECT_TRUE(ValidateRankPlan(wide, limits).ok());
  deep.num_chunks = 4;
  EXPECT_TRUE(ValidateRankPlan(deep, limits).ok());
}

TEST(ValidateRankPlanTest, DefaultLimitsAcceptLargeJobs) {
  RankPlan plan = Plan(1023, 1024, 64, {Part(63, {"dense"}, {Group("dp", {1023, 0})})});
  EXPECT_TRUE(ValidateRankPlan(plan, PlanLimits()).ok());
}

// ---------------------------------------------------------------------------------------------
// SamePlan

TEST(SamePlanTest, IgnoresIncarnationAndGroupRankOrder) {
  RankPlan a = ValidPlan();
  RankPlan b = ValidPlan();
  b.incarnation = "other";
  b.chunks[0].groups[1].ranks = {3, 1};
  EXPECT_TRUE(SamePlan(a, b));
}

TEST(SamePlanTest, NamesEveryDeclaredDifference) {
  const std::vector<std::tuple<std::string, std::function<void(RankPlan&)>, std::string>> changes =
      {
          {"job_id", [](RankPlan& p) { p.job_id = "other"; }, "job_id job -> other"},
          {"world_size", [](RankPlan& p) { p.world_size = 8; }, "world_size 4 -> 8"},
          {"rank", [](RankPlan& p) { p.rank = 3; }, "rank 1 -> 3"},
          {"num_chunks", [](RankPlan& p) { p.num_chunks = 3; }, "num_chunks 2 -> 3"},
          {"first_step", [](RankPlan& p) { p.first_step = 7; }, "first_step 0 -> 7"},
          {"chunk count", [](RankPlan& p) { p.chunks.pop_back(); }, "chunks (entries) 2 -> 1"},
          {"chunk id", [](RankPlan& p) { p.chunks[1].chunk = 2; }, "chunks[1].chunk 1 -> 2"},
          {"optimizers", [](RankPlan& p) { p.chunks[0].optimizers = {"dense"}; },
           "chunks[0].optimizers [dense,expert] -> [dense]"},
          {"group count", [](RankPlan& p) { p.chunks[0].groups.pop_back(); },
           "chunks[0].groups (entries) 2 -> 1"},
          {"group name", [](RankPlan& p) { p.chunks[0].groups[1].name = "edp9"; },
           "chunks[0].groups[1].name edp1 -> edp9"},
          {"group ranks",
           [](RankPlan& p) {
             p.chunks[0].groups[1].ranks = {1, 2};
           },
           "chunks[0].groups[1].ranks [1,3] -> [1,2]"},
      };
  for (const auto& [name, change, difference] : changes) {
    SCOPED_TRACE(name);
    RankPlan b = ValidPlan();
    change(b);
    EXPECT_EQ(PlanDifference(ValidPlan(), b), difference);
    EXPECT_FALSE(SamePlan(ValidPlan(), b));
  }
  EXPECT_EQ(PlanDifference(ValidPlan(), ValidPlan()), "");
}

// ---------------------------------------------------------------------------------------------
// JobPlan::Merge

// W=4, E=2 MoE plan: chunk 0 mixed (dp + edp0=[0,2] / edp1=[1,3]), chunk 1 dense-only,
// chunk 2 expert-only.
RankPlan MoePlan(RankId rank) {
  const std::string edp = absl::StrCat("edp", rank % 2);
  const std::vector<RankId> edp_ranks = {rank % 2, rank % 2 + 2};
  return Plan(rank, 4, 3,
              {Part(0, {"dense", "expert"}, {Group("dp", {0, 1, 2, 3}), Group(edp, edp_ranks)}),
               Part(1, {"dense"}, {Group("dp", {0, 1, 2, 3})}),
               Part(2, {"expert"}, {Group(edp, edp_ranks)})});
}

std::string ContributorsText(const ChunkInfo& info) {
  std::vector<Contributor> cs;
  info.ForEachContributor([&](const Contributor& c) { cs.push_back(c); });
  return absl::StrJoin(cs, ",", [](std::string* out, const Contributor& c) {
    absl::StrAppend(out, c.rank, "/", c.optimizer);
  });
}

// Everything observable of a JobPlan.
std::string PlanText(const JobPlan& plan) {
  std::string out = absl::StrCat("world ", plan.world_size(), " chunks ", plan.num_chunks(),
                                 " first ", plan.first_step(), " joined ", plan.ranks_joined(),
                                 " complete ", plan.complete(), "\n");
  for (RankId r = 0; r < plan.world_size(); ++r) {
    absl::StrAppend(&out, " rank ", r, plan.rank_plan(r) == nullptr ? " -" : " joined", " synced [",
                    absl::StrJoin(plan.synced_chunks(r), ","), "]\n");
  }
  for (ChunkId c = 0; c < plan.num_chunks(); ++c) {
    const ChunkInfo& info = plan.chunk(c);
    absl::StrAppend(&out, " chunk ", c, " contributors [", ContributorsText(info), "] members [",
                    absl::StrJoin(info.members, ","), "] groups");
    for (const auto& [name, ranks] : info.groups) {
      absl::StrAppend(&out, " ", name, "=[", absl::StrJoin(ranks, ","), "]");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

TEST(JobPlanTest, MergesContributorsGroupsAndMembers) {
  JobPlan plan;
  EXPECT_TRUE(plan.empty());
  EXPECT_FALSE(plan.complete());
  for (RankId r : {2, 0, 3}) ASSERT_TRUE(plan.Merge(MoePlan(r)).ok());
  EXPECT_FALSE(plan.complete());
  EXPECT_EQ(plan.ranks_joined(), 3u);
  EXPECT_TRUE(plan.synced_chunks(0).empty()) << "synced chunks are known once complete";
  ASSERT_TRUE(plan.Merge(MoePlan(1)).ok());
  EXPECT_TRUE(plan.complete());
  EXPECT_EQ(plan.part(1, 2)->optimizers, std::vector<std::string>{"expert"});
  EXPECT_EQ(plan.part(1, 7), nullptr);
  EXPECT_EQ(plan.rank_plan(5), nullptr);
  EXPECT_EQ(PlanText(plan),
            "world 4 chunks 3 first 0 joined 4 complete 1\n"
            " rank 0 joined synced [0,1,2]\n"
            " rank 1 joined synced [0,1,2]\n"
            " rank 2 joined synced [0,1,2]\n"
            " rank 3 joined synced [0,1,2]\n"
            " chunk 0 contributors [0/dense,0/expert,1/dense,1/expert,2/dense,2/expert,3/dense,"
            "3/expert] members [0,1,2,3] groups dp=[0,1,2,3] edp0=[0,2] edp1=[1,3]\n"
            " chunk 1 contributors [0/dense,1/dense,2/dense,3/dense] members [0,1,2,3] groups "
            "dp=[0,1,2,3]\n"
            " chunk 2 contributors [0/expert,1/expert,2/expert,3/expert] members [0,1,2,3] groups "
            "edp0=[0,2] edp1=[1,3]\n");
}

TEST(JobPlanTest, AcceptsAGroupListedInAnotherOrder) {
  JobPlan plan;
  ASSERT_TRUE(plan.Merge(MoePlan(0)).ok());
  RankPlan reversed = MoePlan(1);
  reversed.chunks[1].groups[0].ranks = {3, 2, 1, 0};
  const absl::Status merged = plan.Merge(reversed);
  EXPECT_TRUE(merged.ok()) << merged;
  EXPECT_EQ(plan.ranks_joined(), 2u);
}

TEST(JobPlanTest, ChunksWithoutContributorsOrMembershipAreNotSynced) {
  // Chunk 1 is synced by ranks 0 and 1 only; chunk 2 has members but no contributors.
  JobPlan plan;
  ASSERT_TRUE(plan.Merge(Plan(0, 3, 3,
                              {Part(0, {"dense"}, {Group("dp", {0, 1, 2})}),
                               Part(1, {"expert"}, {Group("e", {0, 1})}),
                               Part(2, {}, {Group("dp", {0, 1, 2})})}))
                  .ok());
  ASSERT_TRUE(
      plan.Merge(Plan(1, 3, 3,
                      {Part(0, {"dense"}, {Group("dp", {0, 1, 2})}),
                       Part(1, {}, {Group("e", {0, 1})}), Part(2, {}, {Group("dp", {0, 1, 2})})}))
          .ok());
  ASSERT_TRUE(plan.Merge(Plan(2, 3, 3,
                              {Part(0, {"dense"}, {Group("dp", {0, 1, 2})}),
                               Part(2, {}, {Group("dp", {0, 1, 2})})}))
                  .ok());
  EXPECT_THAT(plan.synced_chunks(0), ElementsAre(0, 1));
  EXPECT_THAT(plan.synced_chunks(1), ElementsAre(0, 1));
  EXPECT_THAT(plan.synced_chunks(2), ElementsAre(0));
  EXPECT_TRUE(plan.synced_chunks(3).empty()) << "no rank 3 in a world of 3";
  EXPECT_EQ(plan.chunk(2).num_contributors(), 0u);
  EXPECT_THAT(plan.chunk(1).members, ElementsAre(0, 1));
}

struct MergeConflictCase {
  std::string name;
  std::vector<RankPlan> merged;  // merged first, all OK
  RankPlan refused;
  std::string message;  // exact
};

TEST(JobPlanTest, RefusesConflictsWithFailedPreconditionAndChangesNothing) {
  RankPlan world8 = MoePlan(1);
  world8.world_size = 8;
  RankPlan chunks4 = MoePlan(1);
  chunks4.num_chunks = 4;
  RankPlan first5 = MoePlan(3);
  first5.first_step = 5;
  RankPlan edp_wider = MoePlan(2);
  edp_wider.chunks[0].groups[1].ranks = {0, 2, 3};
  RankPlan dp_narrower_unsorted = MoePlan(2);
  dp_narrower_unsorted.chunks[1].groups[0].ranks = {2, 1, 0};
  // Rank 0 joins with only dp in chunk 0; rank 2 then lists rank 0 in a new group.
  RankPlan r0_dense_only = Plan(0, 4, 3,
                                {Part(0, {"dense"}, {Group("dp", {0, 1, 2, 3})}),
                                 Part(1, {"dense"}, {Group("dp", {0, 1, 2, 3})})});
  RankPlan r2_no_edp = MoePlan(2);
  r2_no_edp.chunks[0].groups.pop_back();
  r2_no_edp.chunks[2].groups = {Group("solo", {2})};
  RankPlan r2_no_chunk2 = MoePlan(2);
  r2_no_chunk2.chunks.pop_back();

  const std::vector<MergeConflictCase> cases = {
      {"world_size",
       {MoePlan(0)},
       world8,
       "world_size 8 of rank 1 conflicts with 4 declared by rank 0"},
      {"num_chunks",
       {MoePlan(2)},
       chunks4,
       "num_chunks 4 of rank 1 conflicts with 3 declared by rank 2"},
      {"first_step",
       {MoePlan(0), MoePlan(1)},
       first5,
       "first_step 5 of rank 3 conflicts with 0 declared by rank 0"},
      {"rank joined twice",
       {MoePlan(0), MoePlan(1)},
       MoePlan(1),
       "rank 1 already joined this generation"},
      {"group declared with different ranks",
       {MoePlan(0), MoePlan(1)},
       edp_wider,
       "chunk 0 group 'edp0' declared by rank 2 as [0,2,3] but earlier as [0,2]"},
      {"group declared with different ranks, out of order",
       {MoePlan(0), MoePlan(1)},
       dp_narrower_unsorted,
       "chunk 1 group 'dp' declared by rank 2 as [0,1,2] but earlier as [0,1,2,3]"},
      {"group lists a member that joined without it",
       {r0_dense_only},
       MoePlan(2),
       "chunk 0 group 'edp0': rank 2 lists rank 0, but rank 0 joined without that group"},
      {"rank does not declare a group others listed it in",
       {MoePlan(0)},
       r2_no_edp,
       "chunk 0 group 'edp0' [0,2] includes rank 2, but rank 2 did not declare it"},
      {"rank does not declare a chunk others listed it in",
       {MoePlan(0), MoePlan(1)},
       r2_no_chunk2,
       "chunk 2 group 'edp0' [0,2] includes rank 2, but rank 2 did not declare chunk 2"},
  };
  for (const MergeConflictCase& c : cases) {
    SCOPED_TRACE(c.name);
    JobPlan plan;
    for (const RankPlan& p : c.merged) ASSERT_TRUE(plan.Merge(p).ok());
    const std::string before = PlanText(plan);
    const absl::Status status = plan.Merge(c.refused);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_EQ(status.message(), c.message);
    EXPECT_EQ(PlanText(plan), before) << "a refused merge changed the plan";
  }
}

TEST(JobPlanTest, RefusedMergeLeavesNoPartialContributorsOrGroups) {
  // The refused plan fails on its second chunk; its first chunk must not have been merged.
  JobPlan plan;
  ASSERT_TRUE(plan.Merge(MoePlan(0)).ok());
  RankPlan bad = MoePlan(2);
  bad.chunks[2].groups = {Group("edp0", {2})};  // chunk 2's edp0 is [0,2]
  const std::string before = PlanText(plan);
  const absl::Status status = plan.Merge(bad);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "chunk 2 group 'edp0' declared by rank 2 as [2] but earlier as [0,2]");
  EXPECT_EQ(PlanText(plan), before);
  EXPECT_EQ(ContributorsText(plan.chunk(0)), "0/dense,0/expert");
  for (RankId r : {1, 2, 3}) ASSERT_TRUE(plan.Merge(MoePlan(r)).ok()) << r;
  EXPECT_TRUE(plan.complete());
  // Complete: the contributors come from the slots, in the same order; what only joins read is
  // gone.
  EXPECT_EQ(ContributorsText(plan.chunk(0)),
            "0/dense,0/expert,1/dense,1/expert,2/dense,2/expert,3/dense,3/expert");
  EXPECT_TRUE(plan.chunk(0).contributors_while_joining.empty());
  EXPECT_TRUE(plan.chunk(0).groups_listing.empty());
}

}  // namespace
}  // namespace psync::core
