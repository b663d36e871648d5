// FanoutPool: every task runs exactly once, a key's tasks in order on one thread, several keys on
// several threads, inline with none, and the destructor runs what is still queued.
#include "agent/fanout_pool.h"

#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

struct KeyLog {
  absl::Mutex mu;
  std::vector<int> order ABSL_GUARDED_BY(mu);
  absl::flat_hash_set<std::thread::id> threads ABSL_GUARDED_BY(mu);
};

TEST(FanoutPoolTest, WithoutThreadsEveryTaskRunsAtOnceOnTheCallersThreadInOrder) {
  FanoutPool pool(0);
  KeyLog a, b;
  std::vector<FanoutPool::Task> tasks;
  for (int i = 0; i < 3; ++i) {
    for (KeyLog* log : {&a, &b}) {
      tasks.push_back({log, [log, i] {
                         absl::MutexLock lock(&log->mu);
                         log->order.push_back(i);
                         log->threads.insert(std::this_thread::get_id());
                       }});
    }
  }
  pool.Run(std::move(tasks));
  for (KeyLog* log : {&a, &b}) {
    absl::MutexLock lock(&log->mu);
    EXPECT_THAT(log->order, ElementsAre(0, 1, 2));
    EXPECT_THAT(log->threads, ElementsAre(std::this_thread::get_id()));
  }
}

TEST(FanoutPoolTest, EachKeysTasksRunOnceInOrderOnOneThreadAndTheKeysOnSeveral) {
  constexpr int kKeys = 64;
  constexpr int kRounds = 200;
  std::vector<KeyLog> logs(kKeys);
  {
    FanoutPool pool(3);
    ASSERT_EQ(pool.threads(), 3u);
    // Two producers hand over alternate rounds: a round is handed over only after the one before
    // it, so each key's tasks are numbered in the order they were handed over.
    absl::Mutex turn_mu;
    int turn = 0;
    auto produce = [&](int parity) {
      for (int round = parity; round < kRounds; round += 2) {
        absl::MutexLock lock(&turn_mu);
        const auto my_turn = [&turn, round] { return turn == round; };
        turn_mu.Await(absl::Condition(&my_turn, &decltype(my_turn)::operator()));
        std::vector<FanoutPool::Task> tasks;
        for (KeyLog& log : logs) {
          tasks.push_back({&log, [&log, round] {
                             absl::MutexLock l(&log.mu);
                             log.order.push_back(round);
                             log.threads.insert(std::this_thread::get_id());
                           }});
        }
        pool.Run(std::move(tasks));
        ++turn;
      }
    };
    std::thread even(produce, 0), odd(produce, 1);
    even.join();
    odd.join();
  }  // the destructor runs whatever is still queued
  absl::flat_hash_set<std::thread::id> all_threads;
  for (KeyLog& log : logs) {
    absl::MutexLock lock(&log.mu);
    ASSERT_THAT(log.order, SizeIs(kRounds));
    for (int i = 0; i < kRounds; ++i) ASSERT_EQ(log.order[i], i);
    ASSERT_THAT(log.threads, SizeIs(1));
    EXPECT_NE(*log.threads.begin(), std::this_thread::get_id());
    all_threads.insert(*log.threads.begin());
  }
  EXPECT_THAT(all_threads, SizeIs(3));
}

TEST(FanoutPoolTest, TheDestructorRunsTheTasksStillQueued) {
  absl::Notification release;
  int ran = 0;  // one key: every task on one thread, read after the join
  {
    FanoutPool pool(2);
    std::vector<FanoutPool::Task> tasks;
    tasks.push_back({&ran, [&] {
                       release.WaitForNotification();
                       ++ran;
                     }});
    for (int i = 0; i < 99; ++i) tasks.push_back({&ran, [&] { ++ran; }});
    pool.Run(std::move(tasks));
    release.Notify();
  }
  EXPECT_EQ(ran, 100);
}

}  // namespace
}  // namespace psync::agent
