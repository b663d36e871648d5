// Job: events queued for the observer (ObserveLater, a node batch's, observed after its notices)
// are observed before any later ones, and every read of the observer sees them.
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/owner/job.h"

namespace psync::server {
namespace {

core::Event ChunkEvent(core::EventKind kind, core::RankId rank, absl::Time time) {
  core::Event e;
  e.kind = kind;
  e.generation = 1;
  e.step = 0;
  e.chunk = 0;
  e.rank = rank;
  e.time = time;
  return e;
}

class JobObserveTest : public ::testing::Test {
 protected:
  JobObserveTest()
      : job_(std::make_unique<core::JobTracker>("job", core::TrackerOptions()),
             observe::ObserverOptions(), /*ownership_epoch=*/0) {}

  // Queues `events` as a node batch does, under the job's lock.
  void Queue(std::vector<core::Event> events) {
    absl::MutexLock lock(&job_.mu);
    job_.ObserveLater(std::make_shared<const std::vector<core::Event>>(std::move(events)));
  }

  const absl::Time t0_ = absl::FromUnixSeconds(1000);
  Job job_;
};

// A check-in queued by a batch, then a release observed inline (a Session's message): the release
// scores the queued check-in, which it could not if the two were observed the other way round.
TEST_F(JobObserveTest, QueuedEventsAreObservedBeforeLaterOnes) {
  Queue({ChunkEvent(core::EventKind::kCheckin, 3, t0_),
         ChunkEvent(core::EventKind::kCheckin, 5, t0_ + absl::Milliseconds(40))});
  const std::vector<core::Event> release = {
      ChunkEvent(core::EventKind::kRelease, 5, t0_ + absl::Milliseconds(40))};
  absl::MutexLock lock(&job_.observer_mu);
  job_.ObserveEvents(release);
  const std::vector<observe::StragglerScore> scores = job_.CaughtUpObserver().StragglersByRank();
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[0].rank, 3u);
  EXPECT_EQ(scores[0].samples, 1u);
  EXPECT_EQ(scores[1].rank, 5u);
  EXPECT_EQ(scores[1].times_last, 1u);
  EXPECT_EQ(job_.CaughtUpObserver().totals().released, 1u);
  EXPECT_TRUE(job_.unobserved.empty());
}

// Reads catch up: a release queued after its check-ins is counted by the next read, in order.
TEST_F(JobObserveTest, AReadObservesWhatIsQueuedInOrder) {
  Queue({ChunkEvent(core::EventKind::kCheckin, 2, t0_)});
  Queue({ChunkEvent(core::EventKind::kRelease, 2, t0_)});
  Queue({});  // nothing to queue
  absl::MutexLock lock(&job_.observer_mu);
  EXPECT_EQ(job_.unobserved.size(), 2u);
  EXPECT_EQ(job_.CaughtUpObserver().totals().released, 1u);
  const std::vector<observe::StragglerScore> scores = job_.CaughtUpObserver().StragglersByRank();
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_EQ(scores[0].rank, 2u);
  EXPECT_EQ(scores[0].samples, 1u);
}

}  // namespace
}  // namespace psync::server
