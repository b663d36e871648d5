#include "server/job_history.h"

#include <string>

#include "gtest/gtest.h"

namespace psync::server {
namespace {

FinishedJob Finished(const std::string& id, const std::string& reason) {
  FinishedJob job;
  job.view.snapshot.job_id = id;
  job.view.end = {JobEndKind::kEnded, reason, absl::UnixEpoch()};
  return job;
}

TEST(JobHistoryTest, KeepsExactlyTheLastCapacityJobsOldestFirst) {
  JobHistory history(3);
  for (int i = 0; i < 10; ++i) history.Add(Finished("job-" + std::to_string(i), "done"));
  ASSERT_EQ(history.jobs().size(), 3u);
  EXPECT_EQ(history.jobs()[0].view.snapshot.job_id, "job-7");
  EXPECT_EQ(history.jobs()[1].view.snapshot.job_id, "job-8");
  EXPECT_EQ(history.jobs()[2].view.snapshot.job_id, "job-9");
  EXPECT_EQ(history.Find("job-6"), nullptr);
  ASSERT_NE(history.Find("job-7"), nullptr);
  EXPECT_EQ(history.Find("job-7")->view.snapshot.job_id, "job-7");
}

TEST(JobHistoryTest, FindReturnsTheNewestEntryOfARepeatedIdUntilItIsDropped) {
  JobHistory history(3);
  history.Add(Finished("a", "first"));
  history.Add(Finished("b", "b"));
  history.Add(Finished("a", "second"));
  ASSERT_NE(history.Find("a"), nullptr);
  EXPECT_EQ(history.Find("a")->view.end.reason, "second");
  // Dropping the older "a" keeps the newer one findable.
  history.Add(Finished("c", "c"));
  ASSERT_NE(history.Find("a"), nullptr);
  EXPECT_EQ(history.Find("a")->view.end.reason, "second");
  EXPECT_EQ(history.Find("b")->view.end.reason, "b");
  history.Add(Finished("d", "d"));  // drops "b"
  history.Add(Finished("e", "e"));  // drops the newer "a"
  EXPECT_EQ(history.Find("a"), nullptr);
  EXPECT_EQ(history.Find("b"), nullptr);
  EXPECT_EQ(history.jobs().size(), 3u);
}

TEST(JobHistoryTest, CapacityZeroKeepsNothing) {
  JobHistory history(0);
  history.Add(Finished("a", "x"));
  EXPECT_TRUE(history.jobs().empty());
  EXPECT_EQ(history.Find("a"), nullptr);
}

}  // namespace
}  // namespace psync::server
