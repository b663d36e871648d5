#include "server/owner/job_history.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::server {
namespace {

using ::testing::ElementsAre;

FinishedJob Finished(const std::string& id, const std::string& reason) {
  FinishedJob job;
  job.view.snapshot.job_id = id;
  job.view.end = {JobEndKind::kEnded, reason, absl::UnixEpoch()};
  return job;
}

// The ids held, oldest first.
std::vector<std::string> Ids(const JobHistory& history) {
  std::vector<std::string> ids;
  for (const FinishedJob& job : history.jobs()) ids.push_back(job.view.snapshot.job_id);
  return ids;
}

TEST(JobHistoryTest, KeepsExactlyTheLastCapacityJobsOldestFirst) {
  JobHistory history(3);
  for (int i = 0; i < 10; ++i) history.Add(Finished("job-" + std::to_string(i), "done"));
  EXPECT_THAT(Ids(history), ElementsAre("job-7", "job-8", "job-9"));
  EXPECT_EQ(history.Find("job-6"), nullptr);
  ASSERT_NE(history.Find("job-7"), nullptr);
  EXPECT_EQ(history.Find("job-7")->view.snapshot.job_id, "job-7");
}

// A job evicted, joined again and ended again has one entry: its last run, now the newest. It
// takes one place, so no other job is dropped for it.
TEST(JobHistoryTest, ARepeatedIdReplacesItsEarlierEntryAndMovesToTheNewestPlace) {
  JobHistory history(3);
  history.Add(Finished("a", "first"));
  history.Add(Finished("b", "b"));
  history.Add(Finished("a", "second"));
  EXPECT_THAT(Ids(history), ElementsAre("b", "a"));
  ASSERT_NE(history.Find("a"), nullptr);
  EXPECT_EQ(history.Find("a")->view.end.reason, "second");
  history.Add(Finished("c", "c"));  // room: "a" took one place
  EXPECT_THAT(Ids(history), ElementsAre("b", "a", "c"));
  ASSERT_NE(history.Find("b"), nullptr);
  EXPECT_EQ(history.Find("b")->view.end.reason, "b");
  history.Add(Finished("c", "c again"));  // full, but "c" replaces itself: nothing else dropped
  EXPECT_THAT(Ids(history), ElementsAre("b", "a", "c"));
  EXPECT_EQ(history.Find("c")->view.end.reason, "c again");
  history.Add(Finished("d", "d"));  // drops "b", the oldest
  EXPECT_THAT(Ids(history), ElementsAre("a", "c", "d"));
  EXPECT_EQ(history.Find("b"), nullptr);
  history.Add(Finished("e", "e"));  // drops "a": no earlier "a" is left behind to reappear
  EXPECT_THAT(Ids(history), ElementsAre("c", "d", "e"));
  EXPECT_EQ(history.Find("a"), nullptr);
}

TEST(JobHistoryTest, CanonicalJobStateAcceptsEveryStateNameInAnyCaseAndNothingElse) {
  for (const char* name : {"FORMING", "RUNNING", "DEGRADED", "ABORTED", "ENDED", "EVICTED"}) {
    EXPECT_EQ(CanonicalJobState(name), std::optional<std::string>(name)) << name;
    EXPECT_EQ(CanonicalJobState(absl::AsciiStrToLower(name)), std::optional<std::string>(name))
        << name;
  }
  EXPECT_EQ(CanonicalJobState("rUnNiNg"), std::optional<std::string>("RUNNING"));
  for (const char* bad : {"", "DONE", "RUNNING ", " running", "RUN", "EVICTED,ENDED"}) {
    EXPECT_EQ(CanonicalJobState(bad), std::nullopt) << "'" << bad << "'";
  }
}

TEST(JobHistoryTest, CapacityZeroKeepsNothing) {
  JobHistory history(0);
  history.Add(Finished("a", "x"));
  EXPECT_TRUE(history.jobs().empty());
  EXPECT_EQ(history.Find("a"), nullptr);
}

}  // namespace
}  // namespace psync::server
