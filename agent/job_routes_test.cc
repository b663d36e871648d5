#include "agent/job_routes.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/job_start.h"
#include "gtest/gtest.h"

namespace psync::agent {
namespace {

using Move = JobRoutes::Move;

const std::vector<std::string> kTargets = {"a:1", "b:2", "c:3"};

// The list index after `i`.
size_t After(size_t i) { return (i + 1) % kTargets.size(); }

TEST(JobRoutesTest, StartsOnTheEntryTheClientStartsOn) {
  JobRoutes routes(kTargets);
  for (const std::string job : {"job0", "job1", "job2", "a-long-job-id", ""}) {
    const size_t start = std::hash<std::string>{}(job) % kTargets.size();
    EXPECT_EQ(JobStartIndex(job, kTargets.size()), start) << job;
    EXPECT_EQ(routes.Route(job), kTargets[start]) << job;
    EXPECT_EQ(routes.Route(job), kTargets[start]) << job << ": a route stays put";
  }
}

TEST(JobRoutesTest, RedirectMovesTheJobToItsOwnerOnly) {
  JobRoutes routes(kTargets);
  const size_t start = JobStartIndex("j", kTargets.size());
  const std::string other = kTargets[JobStartIndex("k", kTargets.size())];
  EXPECT_EQ(routes.Redirected("j", kTargets[start], "owner:9"), Move::kRedirect);
  EXPECT_EQ(routes.Route("j"), "owner:9");
  EXPECT_EQ(routes.Route("k"), other) << "another job keeps its route";
  // A second rank's answer from the same old replica changes nothing.
  EXPECT_EQ(routes.Redirected("j", kTargets[start], "elsewhere:9"), Move::kNone);
  EXPECT_EQ(routes.Failed("j", kTargets[start]), Move::kNone);
  EXPECT_EQ(routes.Route("j"), "owner:9");
  // The owner redirects further.
  EXPECT_EQ(routes.Redirected("j", "owner:9", kTargets[1]), Move::kRedirect);
  EXPECT_EQ(routes.Route("j"), kTargets[1]);
}

TEST(JobRoutesTest, FailureRotatesThroughTheListOncePerFailure) {
  JobRoutes routes(kTargets);
  size_t entry = JobStartIndex("j", kTargets.size());
  for (int i = 0; i < 4; ++i) {
    const std::string failed = routes.Route("j");
    ASSERT_EQ(failed, kTargets[entry]);
    EXPECT_EQ(routes.Failed("j", failed), Move::kRotate);
    entry = After(entry);
    EXPECT_EQ(routes.Route("j"), kTargets[entry]);
    EXPECT_EQ(routes.Failed("j", failed), Move::kNone) << "the same failure reported again";
    EXPECT_EQ(routes.Route("j"), kTargets[entry]);
  }
}

TEST(JobRoutesTest, FailedRedirectOwnerGoesBackToTheListEntry) {
  JobRoutes routes(kTargets);
  const size_t start = JobStartIndex("j", kTargets.size());
  ASSERT_EQ(routes.Redirected("j", kTargets[start], "owner:9"), Move::kRedirect);
  EXPECT_EQ(routes.Failed("j", "owner:9"), Move::kRotate);
  EXPECT_EQ(routes.Route("j"), kTargets[start]) << "the entry that redirected, tried again";
  EXPECT_EQ(routes.Failed("j", kTargets[start]), Move::kRotate);
  EXPECT_EQ(routes.Route("j"), kTargets[After(start)]);
}

TEST(JobRoutesTest, RedirectToNobodyOrToItselfRotates) {
  JobRoutes routes(kTargets);
  const size_t start = JobStartIndex("j", kTargets.size());
  EXPECT_EQ(routes.Redirected("j", kTargets[start], ""), Move::kRotate);
  EXPECT_EQ(routes.Route("j"), kTargets[After(start)]);
  EXPECT_EQ(routes.Redirected("j", kTargets[After(start)], kTargets[After(start)]), Move::kRotate);
  EXPECT_EQ(routes.Route("j"), kTargets[After(After(start))]);
}

TEST(JobRoutesTest, ASingleTargetFollowsRedirectsButNeverLeavesOnAFailure) {
  JobRoutes routes({"only:1"});
  EXPECT_EQ(routes.Route("j"), "only:1");
  EXPECT_EQ(routes.Failed("j", "only:1"), Move::kNone);
  EXPECT_EQ(routes.Redirected("j", "only:1", ""), Move::kNone);
  EXPECT_EQ(routes.Route("j"), "only:1");
  // A Service in front of replicas: the owner it named is followed, and back when it fails.
  EXPECT_EQ(routes.Redirected("j", "only:1", "owner:9"), Move::kRedirect);
  EXPECT_EQ(routes.Route("j"), "owner:9");
  EXPECT_EQ(routes.Failed("j", "owner:9"), Move::kRotate);
  EXPECT_EQ(routes.Route("j"), "only:1");
  EXPECT_EQ(routes.moved_jobs(), 0u);
}

TEST(JobRoutesTest, OnlyJobsOffTheirListEntryAreRemembered) {
  JobRoutes routes(kTargets);
  for (int i = 0; i < 100; ++i) routes.Route(absl::StrCat("job", i));
  EXPECT_EQ(routes.moved_jobs(), 0u);
  const size_t start = JobStartIndex("j", kTargets.size());
  ASSERT_EQ(routes.Failed("j", kTargets[start]), Move::kRotate);
  EXPECT_EQ(routes.moved_jobs(), 1u);
  // Around the list and back to its start entry: nothing left to remember.
  ASSERT_EQ(routes.Failed("j", kTargets[After(start)]), Move::kRotate);
  ASSERT_EQ(routes.Failed("j", kTargets[After(After(start))]), Move::kRotate);
  EXPECT_EQ(routes.Route("j"), kTargets[start]);
  EXPECT_EQ(routes.moved_jobs(), 0u);
}

TEST(JobRoutesTest, PastTheBoundTheLeastRecentlyUsedMovedJobsAreForgotten) {
  JobRoutes routes(kTargets, /*max_moved=*/8);
  const auto job = [](int i) { return absl::StrCat("j", i); };
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(routes.Redirected(job(i), routes.Route(job(i)), "owner:9"), Move::kRedirect);
  }
  EXPECT_EQ(routes.moved_jobs(), 8u);
  EXPECT_EQ(routes.Route(job(0)), "owner:9");  // j0 used again: j1 and j2 are now the oldest
  ASSERT_EQ(routes.Redirected(job(8), routes.Route(job(8)), "owner:9"), Move::kRedirect);
  // 9 > 8: a quarter (2) forgotten, the least recently used.
  EXPECT_EQ(routes.moved_jobs(), 7u);
  for (int i : {0, 3, 4, 5, 6, 7, 8}) EXPECT_EQ(routes.Route(job(i)), "owner:9") << job(i);
  for (int i : {1, 2}) {
    EXPECT_EQ(routes.Route(job(i)), kTargets[JobStartIndex(job(i), kTargets.size())]) << job(i);
  }
}

}  // namespace
}  // namespace psync::agent
