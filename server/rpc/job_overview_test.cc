#include "server/rpc/job_overview.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::server {
namespace {

using ::testing::ElementsAre;

// 12 ranks on 3 nodes of 4 ("n0": ranks 0-3, "n1": 4-7, "n2": 8-11), 3 chunks:
//   chunk 0 WAITING 2 s: ranks 5 and 9 miss "expert", rank 6 misses "dense"; the rest staged;
//   chunk 1 RELEASED 1 s ago: ranks 2 and 3 have not reported SyncDone;
//   chunk 2 IDLE.
// Rank 10 is lost; ranks 6 and 1 have the highest straggler scores.
JobStatusView Example() {
  JobStatusView view;
  core::JobSnapshot& s = view.snapshot;
  s.job_id = "j";
  s.world_size = 12;
  s.num_chunks = 3;
  s.ranks_joined = 12;
  core::ChunkSnapshot waiting;
  waiting.chunk = 0;
  waiting.step = 7;
  waiting.state = "WAITING";
  waiting.waiting = absl::Seconds(2);
  for (core::RankId r = 0; r < 12; ++r) waiting.members.push_back(r);
  waiting.missing_by_optimizer = {{"dense", {6}}, {"expert", {5, 9}}};
  waiting.staged_count = 21;
  waiting.missing_count = 3;
  core::ChunkSnapshot released;
  released.chunk = 1;
  released.step = 7;
  released.state = "RELEASED";
  released.waiting = absl::Seconds(1);
  for (core::RankId r = 0; r < 12; ++r) released.members.push_back(r);
  released.staged_count = 12;
  released.sync_pending = {2, 3};
  released.sync_pending_count = 2;
  core::ChunkSnapshot idle;
  idle.chunk = 2;
  idle.step = 8;
  idle.state = "IDLE";
  s.chunks = {waiting, released, idle};
  view.deadlines = {absl::Seconds(1), absl::Seconds(5), absl::Seconds(1)};
  view.lost_ranks = {10};
  const std::vector<std::string> names = {"n0", "n0", "n0", "n0", "n1", "n1",
                                          "n1", "n1", "n2", "n2", "n2", "n2"};
  view.nodes =
      observe::LayOutNodes(12, 8, [&](core::RankId r) { return absl::string_view(names[r]); });
  view.rank_scores = {{6, 0.5, 0.4, 3, 1}, {1, 0.25, 0.2, 3, 0}, {8, 0.1, 0.1, 3, 0}};
  return view;
}

v1::JobOverview Overview(const OverviewRequest& request) {
  v1::JobOverview out;
  JobOverviewToProto(Example(), request, &out);
  return out;
}

std::string Runs(const google::protobuf::RepeatedPtrField<v1::RankRange>& runs) {
  std::string out;
  for (const v1::RankRange& r : runs) out += absl::StrCat(r.first(), "-", r.last(), " ");
  return out;
}

TEST(JobOverviewTest, NodesCarryTheWorstStateOfTheirRanksPerChunk) {
  const v1::JobOverview overview = Overview(OverviewRequest{});
  ASSERT_EQ(overview.num_nodes(), 3u);
  EXPECT_EQ(overview.nodes_holding_back(), 3u);
  ASSERT_EQ(overview.nodes_size(), 3);
  const v1::NodeOverview& n0 = overview.nodes(0);
  EXPECT_EQ(n0.node(), "n0");
  EXPECT_EQ(Runs(n0.ranks()), "0-3 ");
  EXPECT_EQ(n0.num_ranks(), 4u);
  EXPECT_EQ(n0.chunk_states(), "SYI");  // staged; 2 and 3 owe SyncDone; idle
  EXPECT_EQ(n0.missing(), 0u);
  EXPECT_EQ(n0.sync_pending(), 2u);
  EXPECT_EQ(n0.waiting_micros(), 1000000);  // the released chunk waits for it
  EXPECT_DOUBLE_EQ(n0.straggler_score_seconds(), 0.25);
  EXPECT_EQ(n0.slowest_rank(), 1u);
  const v1::NodeOverview& n1 = overview.nodes(1);
  EXPECT_EQ(n1.chunk_states(), "MDI");  // 5 and 6 missing; every rank synced chunk 1
  EXPECT_EQ(n1.missing(), 2u);
  EXPECT_EQ(n1.waiting_micros(), 2000000);
  EXPECT_EQ(n1.slowest_rank(), 6u);
  const v1::NodeOverview& n2 = overview.nodes(2);
  EXPECT_EQ(n2.chunk_states(), "MDI");
  EXPECT_EQ(n2.missing(), 1u);
  EXPECT_EQ(n2.lost_ranks(), 1u);
  // The status part keeps the counts, not the lists.
  ASSERT_EQ(overview.status().chunks_size(), 3);
  EXPECT_EQ(overview.status().chunks(0).missing_size(), 0);
  EXPECT_EQ(overview.status().chunks(0).missing_count(), 3u);
  EXPECT_EQ(overview.status().chunks(0).staged_count(), 21u);
  EXPECT_EQ(overview.status().chunks(1).sync_pending_count(), 2u);
}

TEST(JobOverviewTest, MissingIsGroupedByChunkAndWhatLongestWaitingFirst) {
  const v1::JobOverview overview = Overview(OverviewRequest{});
  ASSERT_EQ(overview.missing_groups(), 3u);
  ASSERT_EQ(overview.missing_size(), 3);
  const v1::MissingGroup& dense = overview.missing(0);  // chunk 0 (2 s): dense before expert
  EXPECT_EQ(dense.chunk(), 0u);
  EXPECT_EQ(dense.step(), 7u);
  EXPECT_EQ(dense.what(), "dense");
  EXPECT_EQ(dense.num_ranks(), 1u);
  EXPECT_EQ(Runs(dense.ranks()), "6-6 ");
  EXPECT_THAT(dense.nodes(), ElementsAre("n1"));
  EXPECT_TRUE(dense.late());  // 2 s past a 1 s deadline
  const v1::MissingGroup& expert = overview.missing(1);
  EXPECT_EQ(expert.what(), "expert");
  EXPECT_EQ(expert.num_ranks(), 2u);
  EXPECT_EQ(Runs(expert.ranks()), "5-5 9-9 ");
  EXPECT_EQ(expert.num_nodes(), 2u);
  EXPECT_THAT(expert.nodes(), ElementsAre("n1", "n2"));
  const v1::MissingGroup& sync = overview.missing(2);
  EXPECT_EQ(sync.chunk(), 1u);
  EXPECT_EQ(sync.what(), "sync_done");
  EXPECT_EQ(Runs(sync.ranks()), "2-3 ");
  EXPECT_EQ(sync.waiting_micros(), 1000000);
  EXPECT_EQ(sync.deadline_micros(), 5000000);
  EXPECT_FALSE(sync.late());
}

TEST(JobOverviewTest, LimitsBoundTheAnswerAndCountWhatWasLeftOut) {
  OverviewRequest request;
  request.node_offset = 1;
  request.node_limit = 1;
  request.missing_limit = 1;
  const v1::JobOverview overview = Overview(request);
  EXPECT_EQ(overview.num_nodes(), 3u);
  EXPECT_EQ(overview.node_offset(), 1u);
  ASSERT_EQ(overview.nodes_size(), 1);
  EXPECT_EQ(overview.nodes(0).node(), "n1");
  EXPECT_EQ(overview.missing_groups(), 3u);
  ASSERT_EQ(overview.missing_size(), 1);
  EXPECT_EQ(overview.missing(0).what(), "dense");
  request.node_offset = 7;  // past the end: an empty page
  EXPECT_EQ(Overview(request).nodes_size(), 0);
}

TEST(JobOverviewTest, SlowestNodesRankEveryNodeByItsSlowestRank) {
  OverviewRequest request;
  request.node_limit = 1;  // the page does not limit them
  const v1::JobOverview overview = Overview(request);
  ASSERT_EQ(overview.slowest_nodes_size(), 3);
  EXPECT_EQ(overview.slowest_nodes(0).node(), "n1");
  EXPECT_EQ(overview.slowest_nodes(1).node(), "n0");
  EXPECT_EQ(overview.slowest_nodes(2).node(), "n2");
}

TEST(JobOverviewTest, ExpandedNodesListTheirRanksAndWhatEachMisses) {
  OverviewRequest request;
  request.expand_nodes = {"n1", "nope"};
  const v1::JobOverview overview = Overview(request);
  ASSERT_EQ(overview.expanded_size(), 4);
  EXPECT_EQ(overview.expanded(0).rank(), 4u);
  EXPECT_EQ(overview.expanded(0).chunk_states(), "SDI");
  EXPECT_THAT(overview.expanded(0).missing(), ElementsAre());
  EXPECT_EQ(overview.expanded(1).chunk_states(), "MDI");
  EXPECT_THAT(overview.expanded(1).missing(), ElementsAre("c0:expert"));
  EXPECT_THAT(overview.expanded(2).missing(), ElementsAre("c0:dense"));
  EXPECT_EQ(overview.expanded(2).node(), "n1");
  request.expand_nodes = {"n0"};
  const v1::JobOverview n0 = Overview(request);
  ASSERT_EQ(n0.expanded_size(), 4);
  EXPECT_THAT(n0.expanded(2).missing(), ElementsAre("c1:sync_done"));
  EXPECT_EQ(n0.expanded(2).chunk_states(), "SYI");
}

TEST(JobOverviewTest, RequestLimitsOutOfRangeNameTheField) {
  v1::GetJobOverviewRequest request;
  request.set_node_limit(4097);
  EXPECT_EQ(OverviewRequestFromProto(request).status(),
            absl::InvalidArgumentError("node_limit 4097 out of range [0, 4096]"));
  request.set_node_limit(0);
  request.set_missing_limit(1025);
  EXPECT_EQ(OverviewRequestFromProto(request).status(),
            absl::InvalidArgumentError("missing_limit 1025 out of range [0, 1024]"));
  request.set_missing_limit(0);
  for (int i = 0; i < 17; ++i) request.add_expand_nodes("n");
  EXPECT_EQ(OverviewRequestFromProto(request).status(),
            absl::InvalidArgumentError("expand_nodes: 17 names, at most 16"));
  request.clear_expand_nodes();
  absl::StatusOr<OverviewRequest> defaults = OverviewRequestFromProto(request);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->node_limit, 4096u);
  EXPECT_EQ(defaults->missing_limit, 32u);
}

}  // namespace
}  // namespace psync::server
