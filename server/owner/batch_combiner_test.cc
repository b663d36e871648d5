// BatchCombiner: every task applied exactly once, one round at a time, before its submitter
// returns; tasks that queue during a round are applied together by the next; a runner past its
// bound hands the queue to the longest waiting submitter. No timing is assumed: a test that needs
// tasks queued waits until the combiner says they are.
#include "server/owner/batch_combiner.h"

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace psync::server {
namespace {

struct CountedTask final : BatchCombiner::Task {
  explicit CountedTask(int submitter) : submitter(submitter) {}
  const int submitter;
  int applied = 0;  // written by a round, read by the submitter once Submit returned
};

// What the rounds did: each round's submitters and thread; asserts rounds never overlap.
class RoundLog {
 public:
  void Record(absl::Span<BatchCombiner::Task* const> tasks) {
    EXPECT_FALSE(in_round_.exchange(true)) << "two rounds at once";
    std::vector<int> submitters;
    for (BatchCombiner::Task* t : tasks) {
      auto* c = static_cast<CountedTask*>(t);
      ++c->applied;
      submitters.push_back(c->submitter);
    }
    {
      absl::MutexLock lock(&mu_);
      rounds_.push_back(submitters);
      threads_.push_back(std::this_thread::get_id());
    }
    in_round_ = false;
  }
  std::vector<std::vector<int>> rounds() const {
    absl::MutexLock lock(&mu_);
    return rounds_;
  }
  std::vector<std::thread::id> threads() const {
    absl::MutexLock lock(&mu_);
    return threads_;
  }

 private:
  std::atomic<bool> in_round_{false};
  mutable absl::Mutex mu_;
  std::vector<std::vector<int>> rounds_;
  std::vector<std::thread::id> threads_;
};

// Waits until `n` tasks are queued (they are submitted by other threads).
void AwaitQueued(const BatchCombiner& combiner, size_t n) {
  while (combiner.queued() < n) std::this_thread::yield();
}

TEST(BatchCombinerTest, OneSubmitterRunsItsOwnTaskInOneRound) {
  BatchCombiner combiner;
  RoundLog log;
  CountedTask task(7);
  combiner.Submit(&task, [&](absl::Span<BatchCombiner::Task* const> t) { log.Record(t); });
  EXPECT_EQ(task.applied, 1);
  EXPECT_EQ(log.rounds(), std::vector<std::vector<int>>({{7}}));
  EXPECT_EQ(log.threads(), std::vector<std::thread::id>({std::this_thread::get_id()}));
  EXPECT_EQ(combiner.rounds(), 1u);
  EXPECT_EQ(combiner.queued(), 0u);
}

// A round that records what it applies and holds its first call until Release(), so that tasks
// can be queued meanwhile.
class HeldFirstRound {
 public:
  explicit HeldFirstRound(RoundLog* log) : log_(log) {}
  void operator()(absl::Span<BatchCombiner::Task* const> tasks) const {
    if (!started_.HasBeenNotified()) {
      started_.Notify();
      release_.WaitForNotification();
    }
    log_->Record(tasks);
  }
  void AwaitStarted() { started_.WaitForNotification(); }
  void Release() { release_.Notify(); }

 private:
  RoundLog* const log_;
  mutable absl::Notification started_;  // a round is called as a const function
  absl::Notification release_;
};

// Tasks submitted while the runner's first round runs wait; its next round applies them all at
// once, on the runner's thread, and each submitter returns with its task applied.
TEST(BatchCombinerTest, TasksQueuedDuringARoundAreAppliedTogetherByTheRunner) {
  BatchCombiner combiner;
  RoundLog log;
  HeldFirstRound round(&log);
  std::vector<std::unique_ptr<CountedTask>> tasks;
  for (int i = 1; i <= 3; ++i) tasks.push_back(std::make_unique<CountedTask>(i));
  std::vector<std::thread> submitters;
  std::thread runner([&] {
    CountedTask own(0);
    combiner.Submit(&own, round);
    EXPECT_EQ(own.applied, 1);
  });
  round.AwaitStarted();
  for (int i = 0; i < 3; ++i) {
    submitters.emplace_back([&, i] {
      combiner.Submit(tasks[i].get(), round);
      EXPECT_EQ(tasks[i]->applied, 1);
    });
  }
  AwaitQueued(combiner, 3);
  round.Release();
  runner.join();
  for (std::thread& s : submitters) s.join();
  const std::vector<std::vector<int>> rounds = log.rounds();
  ASSERT_EQ(rounds.size(), 2u);
  EXPECT_EQ(rounds[0], std::vector<int>({0}));
  EXPECT_EQ(std::set<int>(rounds[1].begin(), rounds[1].end()), std::set<int>({1, 2, 3}));
  EXPECT_EQ(log.threads()[0], log.threads()[1]);  // both on the runner's thread
  EXPECT_EQ(combiner.queued(), 0u);
}

// With no rounds allowed after its own, the runner leaves the queued tasks to the longest waiting
// submitter, whose thread applies them.
TEST(BatchCombinerTest, ARunnerPastItsBoundHandsTheQueueToAWaitingSubmitter) {
  BatchCombiner combiner(/*max_rounds=*/0);
  RoundLog log;
  HeldFirstRound round(&log);
  std::thread::id runner_id;
  std::thread runner([&] {
    runner_id = std::this_thread::get_id();
    CountedTask own(0);
    combiner.Submit(&own, round);
    EXPECT_EQ(own.applied, 1);
  });
  round.AwaitStarted();
  CountedTask a(1);
  CountedTask b(2);
  std::thread first([&] { combiner.Submit(&a, round); });
  AwaitQueued(combiner, 1);
  std::thread second([&] { combiner.Submit(&b, round); });
  AwaitQueued(combiner, 2);
  round.Release();
  runner.join();
  first.join();
  second.join();
  EXPECT_EQ(a.applied, 1);
  EXPECT_EQ(b.applied, 1);
  const std::vector<std::vector<int>> rounds = log.rounds();
  ASSERT_EQ(rounds.size(), 2u);
  EXPECT_EQ(rounds[0], std::vector<int>({0}));
  EXPECT_EQ(rounds[1], std::vector<int>({1, 2}));  // in the order they were queued
  EXPECT_NE(log.threads()[1], runner_id);
}

// Many submitters at once: every task applied exactly once, never two rounds at a time, and
// fewer rounds than tasks is not assumed (a busy machine may run each alone).
TEST(BatchCombinerTest, ConcurrentSubmittersEachTaskAppliedExactlyOnce) {
  BatchCombiner combiner(/*max_rounds=*/2);
  RoundLog log;
  constexpr int kThreads = 8;
  constexpr int kTasksEach = 500;
  std::vector<std::vector<std::unique_ptr<CountedTask>>> tasks(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kTasksEach; ++i) {
        tasks[t].push_back(std::make_unique<CountedTask>(t * kTasksEach + i));
        combiner.Submit(tasks[t].back().get(),
                        [&](absl::Span<BatchCombiner::Task* const> ts) { log.Record(ts); });
        EXPECT_EQ(tasks[t].back()->applied, 1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<int> seen(kThreads * kTasksEach, 0);
  size_t applied = 0;
  for (const std::vector<int>& r : log.rounds()) {
    for (int s : r) ++seen[s];
    applied += r.size();
  }
  EXPECT_EQ(applied, static_cast<size_t>(kThreads * kTasksEach));
  for (int count : seen) ASSERT_EQ(count, 1);
  EXPECT_EQ(combiner.rounds(), log.rounds().size());
  EXPECT_EQ(combiner.queued(), 0u);
}

}  // namespace
}  // namespace psync::server
