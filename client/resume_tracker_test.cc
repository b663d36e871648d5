#include "client/resume_tracker.h"

#include "gtest/gtest.h"

namespace psync {
namespace {

psync::v1::SessionUp Staged(uint64_t step, uint32_t chunk, const std::string& optimizer) {
  psync::v1::SessionUp up;
  psync::v1::Staged* item = up.mutable_staged()->add_items();
  item->set_step(step);
  item->set_chunk(chunk);
  item->set_optimizer(optimizer);
  return up;
}

psync::v1::SessionUp SyncDone(uint64_t step, uint32_t chunk) {
  psync::v1::SessionUp up;
  psync::v1::SyncDone* item = up.mutable_sync_done()->add_items();
  item->set_step(step);
  item->set_chunk(chunk);
  return up;
}

TEST(ResumeTrackerTest, NothingDoneNoResume) {
  ResumeTracker tracker;
  EXPECT_FALSE(tracker.Build(3).has_value());
}

// A joined rank that had nothing acknowledged still resumes (at its first step): joining a
// restarted coordinator fresh opened a generation that the other ranks' resumes then aborted.
TEST(ResumeTrackerTest, AJoinedRankAlwaysResumes) {
  ResumeTracker tracker;
  tracker.Start(4);
  std::optional<psync::v1::Resume> resume = tracker.Build(2);
  ASSERT_TRUE(resume.has_value());
  EXPECT_EQ(resume->step(), 4u);
  EXPECT_EQ(resume->staged_size(), 0);
  tracker.Start(9);  // only the first join starts it
  EXPECT_EQ(tracker.Build(2)->step(), 4u);
}

// The resume names the latest aborted generation its rank's latest join was told of.
TEST(ResumeTrackerTest, TheResumeNamesTheAbortItsRunBeganAfter) {
  ResumeTracker tracker;
  tracker.OnJoined(0);
  tracker.Start(0);
  EXPECT_EQ(tracker.Build(1)->restarted_after(), 0u);
  tracker.OnJoined(3);
  EXPECT_EQ(tracker.Build(4)->restarted_after(), 3u);
  EXPECT_EQ(tracker.Build(4)->generation(), 4u);
}

// A directive of a later step (a chunk the rank syncs without staging in it) does not finish the
// current step, whose SyncDone may still be unanswered; it counts once the rank reaches that step.
TEST(ResumeTrackerTest, ADirectiveOfALaterStepWaitsForTheRankToReachIt) {
  ResumeTracker tracker;
  tracker.OnAcknowledged(Staged(7, 0, "dense"));
  tracker.OnDirective(7, 0);
  tracker.OnDirective(8, 2);
  std::optional<psync::v1::Resume> resume = tracker.Build(1);
  EXPECT_EQ(resume->step(), 7u);
  EXPECT_EQ(resume->released_chunks_size(), 1);
  tracker.OnAcknowledged(SyncDone(7, 0));
  tracker.OnAcknowledged(SyncDone(7, 2));
  tracker.OnAcknowledged(Staged(8, 0, "dense"));
  resume = tracker.Build(1);
  EXPECT_EQ(resume->step(), 8u);
  ASSERT_EQ(resume->released_chunks_size(), 1);
  EXPECT_EQ(resume->released_chunks(0), 2u);
  EXPECT_EQ(resume->released_ahead_size(), 0);
}

// Its SyncDone of such a directive may be sent (and unanswered) before the rank's own step is:
// the resume names the release, so the rebuilt coordinator does not take it for an early sync.
TEST(ResumeTrackerTest, ADirectiveOfALaterStepIsInTheResumeAsReleasedAhead) {
  ResumeTracker tracker;
  tracker.OnAcknowledged(Staged(7, 0, "dense"));
  tracker.OnDirective(9, 2);
  tracker.OnDirective(8, 2);
  std::optional<psync::v1::Resume> resume = tracker.Build(1);
  EXPECT_EQ(resume->step(), 7u);
  ASSERT_EQ(resume->released_ahead_size(), 2);
  EXPECT_EQ(resume->released_ahead(0).step(), 8u);
  EXPECT_EQ(resume->released_ahead(0).chunk(), 2u);
  EXPECT_EQ(resume->released_ahead(1).step(), 9u);
}

// A vote is in the resume from the moment it is sent (its answer may be lost with the coordinator),
// but it does not move the resume to its step while the previous step's SyncDone is unanswered.
TEST(ResumeTrackerTest, ASentSkipVoteCountsOnceTheRankIsAtItsStep) {
  ResumeTracker tracker;
  tracker.OnAcknowledged(Staged(2, 0, "dense"));
  psync::v1::SessionUp skip;
  skip.mutable_skip()->set_step(3);
  skip.mutable_skip()->set_reason("found_inf");
  tracker.OnSent(skip);
  std::optional<psync::v1::Resume> resume = tracker.Build(1);
  EXPECT_EQ(resume->step(), 2u);
  EXPECT_EQ(resume->skip_reason(), "");
  tracker.OnAcknowledged(SyncDone(2, 0));
  tracker.OnAcknowledged(skip);
  resume = tracker.Build(1);
  EXPECT_EQ(resume->step(), 3u);
  EXPECT_EQ(resume->skip_reason(), "found_inf");
}

TEST(ResumeTrackerTest, AnAcknowledgedSkipVoteIsResumedUntilTheStepIsSkipped) {
  ResumeTracker tracker;
  psync::v1::SessionUp skip;
  skip.mutable_skip()->set_step(3);
  skip.mutable_skip()->set_reason("found_inf");
  tracker.OnAcknowledged(skip);
  std::optional<psync::v1::Resume> resume = tracker.Build(1);
  EXPECT_EQ(resume->step(), 3u);
  EXPECT_EQ(resume->skip_reason(), "found_inf");
  tracker.OnStepSkipped(3);
  resume = tracker.Build(1);
  EXPECT_EQ(resume->step(), 4u);
  EXPECT_EQ(resume->skip_reason(), "");
}

TEST(ResumeTrackerTest, KeepsTheCurrentStepOnly) {
  ResumeTracker tracker;
  tracker.OnAcknowledged(Staged(4, 0, "dense"));
  tracker.OnAcknowledged(SyncDone(4, 0));
  tracker.OnAcknowledged(Staged(5, 1, "expert"));
  tracker.OnAcknowledged(Staged(5, 0, "dense"));
  tracker.OnAcknowledged(Staged(4, 1, "dense"));  // late answer of a finished step: ignored
  tracker.OnDirective(5, 0);
  tracker.OnDirective(5, 1);
  tracker.OnAcknowledged(SyncDone(5, 1));
  std::optional<psync::v1::Resume> resume = tracker.Build(7);
  ASSERT_TRUE(resume.has_value());
  EXPECT_EQ(resume->generation(), 7u);
  EXPECT_EQ(resume->step(), 5u);
  ASSERT_EQ(resume->staged_size(), 2);
  EXPECT_EQ(resume->staged(0).chunk(), 0u);
  EXPECT_EQ(resume->staged(0).optimizer(), "dense");
  EXPECT_EQ(resume->staged(1).chunk(), 1u);
  EXPECT_EQ(resume->staged(1).optimizer(), "expert");
  EXPECT_EQ(resume->staged(1).step(), 5u);
  ASSERT_EQ(resume->synced_chunks_size(), 1);
  EXPECT_EQ(resume->synced_chunks(0), 1u);
  // Chunk 0's directive arrived, its SyncDone was not acknowledged.
  ASSERT_EQ(resume->released_chunks_size(), 1);
  EXPECT_EQ(resume->released_chunks(0), 0u);
}

TEST(ResumeTrackerTest, ASkippedStepMovesToTheNextStep) {
  ResumeTracker tracker;
  tracker.OnAcknowledged(Staged(2, 0, "dense"));
  tracker.OnStepSkipped(3);
  std::optional<psync::v1::Resume> resume = tracker.Build(1);
  ASSERT_TRUE(resume.has_value());
  EXPECT_EQ(resume->step(), 4u);
  EXPECT_EQ(resume->staged_size(), 0);
}

TEST(ResumeTrackerTest, SetMessageGenerationCoversEveryKind) {
  psync::v1::SessionUp staged = Staged(1, 0, "dense");
  SetMessageGeneration(&staged, 9);
  EXPECT_EQ(staged.staged().generation(), 9u);
  psync::v1::SessionUp done = SyncDone(1, 0);
  SetMessageGeneration(&done, 9);
  EXPECT_EQ(done.sync_done().generation(), 9u);
  psync::v1::SessionUp skip;
  skip.mutable_skip()->set_step(1);
  SetMessageGeneration(&skip, 9);
  EXPECT_EQ(skip.skip().generation(), 9u);
}

}  // namespace
}  // namespace psync
