#include "agent/local_completion.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace psync::agent {
namespace {

// A JoinRequest of `rank` in `job` declaring, per chunk, the optimizers given.
v1::JoinRequest Join(const std::string& job, uint32_t rank,
                     const std::vector<std::pair<uint32_t, std::vector<std::string>>>& chunks) {
  v1::JoinRequest j;
  j.set_job_id(job);
  j.set_rank(rank);
  for (const auto& [chunk, optimizers] : chunks) {
    v1::ChunkPlan* p = j.add_chunks();
    p->set_chunk(chunk);
    for (const std::string& o : optimizers) p->add_optimizers(o);
  }
  return j;
}

TEST(LocalCompletionTest, CompletesWhenEveryDeclaredLocalCheckInOfTheChunkIsQueued) {
  LocalCompletion c;
  c.Declare(Join("job", 0, {{0, {"dense", "expert"}}, {1, {"dense"}}}));
  c.Declare(Join("job", 1, {{0, {"dense"}}, {1, {}}}));  // no optimizer in chunk 1
  EXPECT_EQ(c.Expected("job", 0), 3u);
  EXPECT_EQ(c.Expected("job", 1), 1u);
  EXPECT_EQ(c.Expected("job", 2), 0u);
  EXPECT_EQ(c.Expected("other", 0), 0u);

  EXPECT_FALSE(c.Checkin("job", 0, 5, 0));
  EXPECT_FALSE(c.Checkin("job", 0, 5, 0));
  EXPECT_TRUE(c.Checkin("job", 0, 5, 1));  // chunk 1 has one local check-in: rank 0's dense
  EXPECT_EQ(c.open(), 1u);                 // (5, 0) counted so far
  EXPECT_TRUE(c.Checkin("job", 1, 5, 0));  // the third of chunk 0
  EXPECT_EQ(c.open(), 0u);
  // The next step counts afresh.
  EXPECT_FALSE(c.Checkin("job", 1, 6, 0));
  EXPECT_EQ(c.open(), 1u);
}

TEST(LocalCompletionTest, ACheckinItCannotCountIsWrittenAtOnce) {
  LocalCompletion c;
  EXPECT_TRUE(c.Checkin("job", 0, 0, 0));  // no plan of the job
  c.Declare(Join("job", 0, {{0, {"dense"}}}));
  c.Declare(Join("job", 1, {{0, {"dense"}}}));
  EXPECT_TRUE(c.Checkin("job", 0, 0, 3));  // a chunk rank 0 did not declare
  EXPECT_TRUE(c.Checkin("job", 2, 0, 0));  // a rank that joined elsewhere
  EXPECT_TRUE(c.Checkin("other", 0, 0, 0));
  EXPECT_EQ(c.open(), 0u);                  // none of them counted
  EXPECT_FALSE(c.Checkin("job", 0, 0, 0));  // the known ranks still wait for each other
  EXPECT_TRUE(c.Checkin("job", 1, 0, 0));
}

TEST(LocalCompletionTest, ARejoinReplacesTheRanksEarlierPlan) {
  LocalCompletion c;
  c.Declare(Join("job", 0, {{0, {"dense", "expert"}}}));
  c.Declare(Join("job", 1, {{0, {"dense"}}}));
  EXPECT_EQ(c.Expected("job", 0), 3u);
  c.Declare(Join("job", 0, {{0, {"dense"}}, {1, {"dense"}}}));
  EXPECT_EQ(c.Expected("job", 0), 2u);
  EXPECT_EQ(c.Expected("job", 1), 1u);
  EXPECT_FALSE(c.Checkin("job", 0, 0, 0));
  EXPECT_TRUE(c.Checkin("job", 1, 0, 0));
}

TEST(LocalCompletionTest, KeepsAtMostMaxOpenCountsDroppingTheOldestSteps) {
  LocalCompletion c(/*max_open=*/2);
  c.Declare(Join("job", 0, {{0, {"dense"}}}));
  c.Declare(Join("job", 1, {{0, {"dense"}}}));
  EXPECT_FALSE(c.Checkin("job", 0, 1, 0));
  EXPECT_FALSE(c.Checkin("job", 0, 2, 0));
  EXPECT_FALSE(c.Checkin("job", 0, 3, 0));  // step 1's count is dropped
  EXPECT_EQ(c.open(), 2u);
  EXPECT_FALSE(c.Checkin("job", 1, 1, 0));  // counted afresh: 1 of 2
  EXPECT_TRUE(c.Checkin("job", 1, 3, 0));
}

TEST(LocalCompletionTest, KeepsThePlansOfTheMostRecentlyDeclaredJobs) {
  LocalCompletion c(/*max_open=*/16, /*max_jobs=*/2);
  c.Declare(Join("a", 0, {{0, {"dense"}}}));
  c.Declare(Join("b", 0, {{0, {"dense"}}}));
  c.Declare(Join("a", 1, {{0, {"dense"}}}));  // a is now the more recent
  c.Declare(Join("c", 0, {{0, {"dense"}}}));  // b is forgotten
  EXPECT_EQ(c.jobs(), 2u);
  EXPECT_EQ(c.Expected("a", 0), 2u);
  EXPECT_EQ(c.Expected("b", 0), 0u);
  EXPECT_EQ(c.Expected("c", 0), 1u);
  EXPECT_TRUE(c.Checkin("b", 0, 0, 0));  // forgotten: cannot tell, so at once
  EXPECT_EQ(c.open(), 0u);
  c.Declare(Join("c", 1, {{0, {"dense"}}}));
  EXPECT_FALSE(c.Checkin("c", 0, 0, 0));  // c still counts: 1 of 2
}

}  // namespace
}  // namespace psync::agent
