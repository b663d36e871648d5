// CoordinatorMetrics over a long-running coordinator: a job's series go away when the job ends,
// finished jobs are counted by how they left, rejections for no live job share one series
// (job="") instead of one per job id a client sends, and who is missing is counted per node.
#include "server/coordinator_metrics.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serve/clock.h"
#include "server/owner/fake_sinks.h"

namespace psync::server {
namespace {

using ::psync::core::testing::Item;
using ::psync::server::testing::DenseDone;
using ::psync::server::testing::DensePlan;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(CoordinatorMetricsTest, AnEndedJobsSeriesAreFreedAndUnknownJobsShareOneSeries) {
  serve::FakeClock clock;
  Coordinator coordinator(CoordinatorOptions(), &clock);
  metrics::Registry registry;
  auto created = CoordinatorMetrics::Create(&coordinator, &registry);
  ASSERT_TRUE(created.ok()) << created.status();
  for (core::RankId r = 0; r < 2; ++r)
    ASSERT_TRUE(coordinator.Join(DensePlan("job", r, 2, 1)).ok());
  for (core::RankId r = 0; r < 2; ++r) {
    ASSERT_TRUE(coordinator.Stage("job", r, 1, {Item(0, 0, "dense")}).ok());
  }
  for (core::RankId r = 0; r < 2; ++r) {
    ASSERT_TRUE(coordinator.SyncDone("job", r, 1, DenseDone(0, {0})).ok());
  }
  std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("psync_checkins_total{job=\"job\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("psync_jobs 1\n"));
  // The coordinator's own load: totals of seconds, raised to the coordinator's at each scrape.
  for (const char* name :
       {"psync_coordinator_lock_wait_seconds_total ", "psync_coordinator_lock_held_seconds_total ",
        "psync_coordinator_delivering_seconds_total ", "psync_checkins_by_chunk_total ",
        "psync_job_lock_held_seconds_total{job=\"job\"} ",
        "psync_job_lock_wait_seconds_total{job=\"job\"} "}) {
    EXPECT_THAT(text, HasSubstr(std::string("\n") + name)) << name;
  }
  const double held_seconds = absl::ToDoubleSeconds(coordinator.load_times().lock_held);
  const std::string next = registry.Render();
  const size_t at = next.find("\npsync_coordinator_lock_held_seconds_total ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_GE(std::stod(next.substr(at + 43)), held_seconds);

  ASSERT_TRUE(coordinator.EndJob("job", "done", "").ok());
  // Late messages, and messages for jobs never seen, are counted without a series per job id.
  EXPECT_FALSE(coordinator.Stage("job", 0, 1, {Item(1, 0, "dense")}).ok());
  EXPECT_FALSE(coordinator.Stage("never-seen-1", 0, 1, {Item(0, 0, "dense")}).ok());
  EXPECT_FALSE(coordinator.Stage("never-seen-2", 0, 1, {Item(0, 0, "dense")}).ok());
  text = registry.Render();
  EXPECT_THAT(text, Not(HasSubstr("job=\"job\"")));
  EXPECT_THAT(text, Not(HasSubstr("never-seen")));
  EXPECT_THAT(text, HasSubstr("psync_rejected_total{job=\"\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("psync_jobs_finished_total{how=\"ended\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psync_jobs 0\n"));
}

// Who is missing, per node, at each scrape: the waiting chunks' missing contributors summed, the
// nodes missing any, and the node missing the most (node_series 1). A rank that joins naming its
// node is counted on it from the next scrape on.
TEST(CoordinatorMetricsTest, WhoIsMissingIsCountedPerNodeAtEachScrape) {
  serve::FakeClock clock;
  Coordinator coordinator(CoordinatorOptions(), &clock);
  metrics::Registry registry;
  auto created = CoordinatorMetrics::Create(&coordinator, &registry, /*node_series=*/1);
  ASSERT_TRUE(created.ok()) << created.status();
  // Ranks 0-2 on node a, 3-4 on b; rank 5 joins later, on c. Two chunks.
  const char* const node_of[] = {"a", "a", "a", "b", "b", "c"};
  for (core::RankId r = 0; r < 5; ++r) {
    core::RankPlan plan = DensePlan("job", r, 6, 2);
    plan.node = node_of[r];
    ASSERT_TRUE(coordinator.Join(plan).ok());
  }
  // Before rank 5 joins, it is on the block of ranks that named no node.
  std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("psync_missing_contributors{job=\"job\"} 0\n"));
  absl::StatusOr<JobStatusView> view = coordinator.GetJobStatus("job");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_THAT(view->nodes.names, ::testing::ElementsAre("a", "b", "ranks 0-5"));
  core::RankPlan last = DensePlan("job", 5, 6, 2);
  last.node = node_of[5];
  ASSERT_TRUE(coordinator.Join(last).ok());
  view = coordinator.GetJobStatus("job");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_THAT(view->nodes.names, ::testing::ElementsAre("a", "b", "c"));
  // Chunk 0 waits for ranks 1, 2 (node a) and 4 (node b); chunk 1 waits for nobody's check-in.
  for (core::RankId r : {0, 3, 5}) {
    ASSERT_TRUE(coordinator.Stage("job", r, 1, {Item(0, 0, "dense")}).ok());
  }
  text = registry.Render();
  EXPECT_THAT(text, HasSubstr("psync_missing_contributors{job=\"job\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("psync_nodes_missing{job=\"job\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("psync_node_missing_contributors{job=\"job\",node=\"a\"} 2\n"));
  EXPECT_THAT(text, Not(HasSubstr("node=\"b\"")));  // one node's series only
  // Node a catches up: b is the one missing the most, and a's series goes.
  for (core::RankId r : {1, 2}) {
    ASSERT_TRUE(coordinator.Stage("job", r, 1, {Item(0, 0, "dense")}).ok());
  }
  text = registry.Render();
  EXPECT_THAT(text, HasSubstr("psync_missing_contributors{job=\"job\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psync_nodes_missing{job=\"job\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psync_node_missing_contributors{job=\"job\",node=\"b\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("node=\"a\"")));
}

TEST(CoordinatorMetricsTest, EachDecisionWithNoticesIsTimedToItsStreamsOnce) {
  serve::FakeClock clock;
  Coordinator coordinator(CoordinatorOptions(), &clock);
  metrics::Registry registry;
  auto created = CoordinatorMetrics::Create(&coordinator, &registry);
  ASSERT_TRUE(created.ok()) << created.status();
  testing::CallLog log;
  std::vector<std::string> session_ids;
  for (core::RankId r = 0; r < 2; ++r) {
    absl::StatusOr<core::JoinResult> joined = coordinator.Join(DensePlan("job", r, 2, 2));
    ASSERT_TRUE(joined.ok()) << joined.status();
    ASSERT_TRUE(coordinator
                    .Attach("job", r, 1, joined->session_id,
                            std::make_shared<testing::FakeSink>(absl::StrCat("r", r), &log))
                    .ok());
  }
  // Check-ins decide nothing to deliver; each chunk's release is one decision with notices.
  for (core::ChunkId c = 0; c < 2; ++c) {
    for (core::RankId r = 0; r < 2; ++r) {
      ASSERT_TRUE(coordinator.Stage("job", r, 1, {Item(0, c, "dense")}).ok());
    }
  }
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("\npsync_decision_delivery_seconds_count 2\n"));
  EXPECT_THAT(text, HasSubstr("\npsync_decision_delivery_seconds_bucket{le=\"+Inf\"} 2\n"));
  created->reset();  // the coordinator stops timing into the registry's histogram
  ASSERT_TRUE(coordinator.SyncDone("job", 0, 1, DenseDone(0, {0})).ok());
}

core::Event MetricEvent(core::EventKind kind, const std::string& job, core::Step step,
                        core::ChunkId chunk, int ms) {
  core::Event e;
  e.kind = kind;
  e.job_id = job;
  e.generation = 1;
  e.step = step;
  e.chunk = chunk;
  e.rank = 0;
  e.time = absl::UnixEpoch() + absl::Milliseconds(ms);
  return e;
}

TEST(CoordinatorMetricsTest, InterleavedCheckinsOfChunksAndJobsAreEachTimedAtTheirRelease) {
  serve::FakeClock clock;
  Coordinator coordinator(CoordinatorOptions(), &clock);
  metrics::Registry registry;
  auto created = CoordinatorMetrics::Create(&coordinator, &registry);
  ASSERT_TRUE(created.ok()) << created.status();
  using core::EventKind;
  // One delivery's events: runs of one chunk (a node's batch), two chunks of job a interleaved,
  // and job b between them.
  std::vector<core::Event> events = {
      MetricEvent(EventKind::kCheckin, "a", 3, 0, 0),
      MetricEvent(EventKind::kCheckin, "a", 3, 0, 0),
      MetricEvent(EventKind::kCheckin, "a", 3, 1, 0),
      MetricEvent(EventKind::kCheckin, "b", 3, 0, 0),
      MetricEvent(EventKind::kSyncDone, "b", 2, 0, 0),
      MetricEvent(EventKind::kCheckin, "a", 3, 0, 0),
      MetricEvent(EventKind::kSyncDone, "a", 2, 0, 0),
      MetricEvent(EventKind::kSyncDone, "a", 2, 1, 0),
      MetricEvent(EventKind::kRelease, "a", 3, 0, 2000),  // 3 check-ins, each waited 2 s
      MetricEvent(EventKind::kCheckin, "a", 3, 1, 0),
  };
  (*created)->OnEvents(events);
  (*created)->OnEvents({MetricEvent(EventKind::kRelease, "a", 3, 1, 20)});  // 2 check-ins, 20 ms
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("psync_checkins_total{job=\"a\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("psync_checkins_total{job=\"b\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psync_sync_done_total{job=\"a\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("psync_sync_done_total{job=\"b\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("psync_stage_wait_seconds_count{job=\"a\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("psync_stage_wait_seconds_bucket{job=\"a\",le=\"0.025\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("psync_stage_wait_seconds_bucket{job=\"a\",le=\"1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("psync_stage_wait_seconds_bucket{job=\"a\",le=\"2.5\"} 5\n"));
  EXPECT_THAT(text, Not(HasSubstr("psync_stage_wait_seconds_count{job=\"b\"}")))
      << "job b's chunk is not released";
}

}  // namespace
}  // namespace psync::server
