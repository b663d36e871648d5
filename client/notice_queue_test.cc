#include "client/notice_queue.h"

#include <thread>

#include "gtest/gtest.h"

namespace psync {
namespace {

using AddResult = NoticeQueue::AddResult;

psync::v1::SessionDown Directive(uint64_t generation, uint64_t step, uint32_t chunk,
                                 uint64_t sequence) {
  psync::v1::SessionDown down;
  psync::v1::SyncDirective* d = down.mutable_directive();
  d->set_generation(generation);
  d->set_step(step);
  d->set_chunk(chunk);
  d->set_sequence(sequence);
  return down;
}

psync::v1::SessionDown Skipped(uint64_t generation, uint64_t step) {
  psync::v1::SessionDown down;
  down.mutable_step_skipped()->set_generation(generation);
  down.mutable_step_skipped()->set_step(step);
  return down;
}

psync::v1::SessionDown Abort(uint64_t generation, uint64_t step, const std::string& reason) {
  psync::v1::SessionDown down;
  down.mutable_abort()->set_generation(generation);
  down.mutable_abort()->set_step(step);
  down.mutable_abort()->set_reason(reason);
  return down;
}

// A deadline that has already passed: waits return at once.
absl::Time Past() { return absl::InfinitePast(); }

TEST(NoticeQueueTest, DirectiveIsHandedOutOnce) {
  NoticeQueue queue;
  queue.SetGeneration(3);
  EXPECT_EQ(queue.Add(Directive(3, 10, 1, 7)), AddResult::kAccepted);
  absl::StatusOr<psync::v1::SyncDirective> d = queue.WaitForDirective(10, 1, Past());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->sequence(), 7u);
  EXPECT_EQ(queue.WaitForDirective(10, 1, Past()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(NoticeQueueTest, RepeatsAreDroppedAndCounted) {
  NoticeQueue queue;
  queue.SetGeneration(1);
  EXPECT_EQ(queue.Add(Directive(1, 0, 0, 1)), AddResult::kAccepted);
  EXPECT_EQ(queue.Add(Directive(1, 0, 0, 1)), AddResult::kDuplicate);
  ASSERT_TRUE(queue.WaitForDirective(0, 0, Past()).ok());
  // A repeat after the directive was handed out (a reconnect re-sent it) is still a duplicate.
  EXPECT_EQ(queue.Add(Directive(1, 0, 0, 1)), AddResult::kDuplicate);
  EXPECT_EQ(queue.WaitForDirective(0, 0, Past()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(queue.Add(Directive(1, 0, 1, 2)), AddResult::kAccepted);
  const NoticeQueue::Counters c = queue.counters();
  EXPECT_EQ(c.directives_received, 2u);
  EXPECT_EQ(c.duplicate_directives, 2u);
  EXPECT_EQ(c.stale_notices, 0u);
}

TEST(NoticeQueueTest, OtherGenerationsAreStale) {
  NoticeQueue queue;
  queue.SetGeneration(2);
  EXPECT_EQ(queue.Add(Directive(1, 0, 0, 1)), AddResult::kStale);
  EXPECT_EQ(queue.Add(Directive(3, 0, 0, 1)), AddResult::kStale);
  EXPECT_EQ(queue.Add(Skipped(1, 0)), AddResult::kStale);
  EXPECT_EQ(queue.Add(Abort(1, 0, "old")), AddResult::kStale);
  EXPECT_EQ(queue.counters().stale_notices, 4u);
  EXPECT_EQ(queue.WaitForDirective(0, 0, Past()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(NoticeQueueTest, AcksAreNotNotices) {
  NoticeQueue queue;
  psync::v1::SessionDown ack;
  ack.mutable_ack()->set_request_id(1);
  EXPECT_EQ(queue.Add(ack), AddResult::kIgnored);
  EXPECT_EQ(queue.Add(psync::v1::SessionDown()), AddResult::kIgnored);
}

TEST(NoticeQueueTest, StepSkippedStays) {
  NoticeQueue queue;
  queue.SetGeneration(1);
  EXPECT_EQ(queue.WaitForStepSkipped(4, Past()).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(queue.Add(Skipped(1, 4)), AddResult::kAccepted);
  EXPECT_EQ(queue.Add(Skipped(1, 4)), AddResult::kDuplicate);
  EXPECT_TRUE(queue.WaitForStepSkipped(4, Past()).ok());
  EXPECT_TRUE(queue.WaitForStepSkipped(4, Past()).ok());
  EXPECT_EQ(queue.WaitForStepSkipped(5, Past()).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(NoticeQueueTest, AbortWakesEveryWaitWithTheReason) {
  NoticeQueue queue;
  queue.SetGeneration(5);
  absl::Status waited;
  std::thread waiter(
      [&] { waited = queue.WaitForDirective(1, 0, absl::InfiniteFuture()).status(); });
  EXPECT_EQ(queue.Add(Abort(5, 1, "skip disagreement at step 1")), AddResult::kAccepted);
  waiter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted);
  EXPECT_NE(waited.message().find("skip disagreement at step 1"), std::string::npos);
  // Later waits fail the same way, even for a directive that is here.
  queue.Add(Directive(5, 2, 0, 9));
  EXPECT_EQ(queue.WaitForDirective(2, 0, Past()).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(queue.WaitForStepSkipped(1, Past()).code(), absl::StatusCode::kAborted);
}

TEST(NoticeQueueTest, WaiterWakesWhenItsDirectiveArrives) {
  NoticeQueue queue;
  queue.SetGeneration(1);
  absl::StatusOr<psync::v1::SyncDirective> got;
  std::thread waiter([&] { got = queue.WaitForDirective(7, 3, absl::InfiniteFuture()); });
  queue.Add(Directive(1, 7, 2, 1));  // another chunk: the waiter keeps waiting
  queue.Add(Directive(1, 7, 3, 2));
  waiter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->chunk(), 3u);
  EXPECT_EQ(got->sequence(), 2u);
}

TEST(NoticeQueueTest, FailEndsWaits) {
  NoticeQueue queue;
  queue.SetGeneration(1);
  absl::Status waited;
  std::thread waiter([&] { waited = queue.WaitForStepSkipped(0, absl::InfiniteFuture()); });
  queue.Fail(absl::CancelledError("closed"));
  waiter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kCancelled);
  queue.Fail(absl::InternalError("second"));  // the first call wins
  EXPECT_EQ(queue.WaitForDirective(0, 0, Past()).status().code(), absl::StatusCode::kCancelled);
}

TEST(NoticeQueueTest, NewGenerationForgetsTheOldOne) {
  NoticeQueue queue;
  queue.SetGeneration(1);
  queue.Add(Directive(1, 0, 0, 1));
  queue.Add(Abort(1, 0, "restart"));
  queue.SetGeneration(2);
  EXPECT_EQ(queue.WaitForDirective(0, 0, Past()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(queue.Add(Directive(2, 0, 0, 2)), AddResult::kAccepted);
  EXPECT_TRUE(queue.WaitForDirective(0, 0, Past()).ok());
}

TEST(NoticeQueueTest, AContinuedGenerationKeepsWhatWasSeen) {
  NoticeQueue q;
  q.SetGeneration(3);
  EXPECT_EQ(q.Add(Directive(3, 5, 0, 1)), AddResult::kAccepted);  // not handed out yet
  EXPECT_EQ(q.Add(Directive(3, 5, 1, 2)), AddResult::kAccepted);
  ASSERT_TRUE(q.WaitForDirective(5, 1, Past()).ok());  // handed out
  q.ContinueGeneration(4);
  // The restarted coordinator sends both again: duplicates.
  EXPECT_EQ(q.Add(Directive(4, 5, 0, 1)), AddResult::kDuplicate);
  EXPECT_EQ(q.Add(Directive(4, 5, 1, 1)), AddResult::kDuplicate);
  EXPECT_EQ(q.Add(Directive(3, 5, 2, 3)), AddResult::kStale);
  absl::StatusOr<psync::v1::SyncDirective> d = q.WaitForDirective(5, 0, Past());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->generation(), 4u);
  EXPECT_EQ(q.WaitForDirective(5, 1, Past()).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(q.Add(Directive(4, 5, 2, 2)), AddResult::kAccepted);
}

TEST(NoticeQueueTest, WindowBoundsMemory) {
  NoticeQueue queue(/*window_steps=*/4);
  queue.SetGeneration(1);
  EXPECT_EQ(queue.Add(Directive(1, 0, 0, 1)), AddResult::kAccepted);
  EXPECT_EQ(queue.Add(Directive(1, 10, 0, 2)), AddResult::kAccepted);
  // Step 0 is now more than 4 steps behind: forgotten, and a late repeat of it is dropped.
  EXPECT_EQ(queue.WaitForDirective(0, 0, Past()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(queue.Add(Directive(1, 0, 0, 1)), AddResult::kDuplicate);
  EXPECT_EQ(queue.Add(Directive(1, 6, 0, 3)), AddResult::kAccepted);
  EXPECT_TRUE(queue.WaitForDirective(10, 0, Past()).ok());
  EXPECT_TRUE(queue.WaitForDirective(6, 0, Past()).ok());
}

}  // namespace
}  // namespace psync
