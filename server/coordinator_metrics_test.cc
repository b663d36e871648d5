// CoordinatorMetrics over a long-running coordinator: a job's series go away when the job ends,
// finished jobs are counted by how they left, and rejections for no live job share one series
// (job="") instead of one per job id a client sends.
#include "server/coordinator_metrics.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/clock.h"
#include "server/fake_sinks.h"

namespace psync::server {
namespace {

using ::psync::core::testing::Item;
using ::psync::server::testing::DenseDone;
using ::psync::server::testing::DensePlan;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(CoordinatorMetricsTest, AnEndedJobsSeriesAreFreedAndUnknownJobsShareOneSeries) {
  FakeClock clock;
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

}  // namespace
}  // namespace psync::server
