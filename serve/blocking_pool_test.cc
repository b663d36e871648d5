// BlockingPool: tasks run on the pool's threads, in the order queued (one thread), and the
// destructor runs every task still queued before it returns.
#include "serve/blocking_pool.h"

#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::serve {
namespace {

using ::testing::ElementsAre;

TEST(BlockingPoolTest, OneThreadRunsTasksInOrderOffTheCallersThread) {
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  absl::Notification done;
  {
    BlockingPool pool(1);
    for (int i = 0; i < 3; ++i) {
      pool.Run([&, i] {
        order.push_back(i);
        threads.push_back(std::this_thread::get_id());
      });
    }
    pool.Run([&] { done.Notify(); });
    done.WaitForNotification();
  }
  EXPECT_THAT(order, ElementsAre(0, 1, 2));
  for (std::thread::id id : threads) EXPECT_NE(id, std::this_thread::get_id());
}

TEST(BlockingPoolTest, TheDestructorRunsWhatIsQueued) {
  absl::Notification release;
  int ran = 0;
  {
    BlockingPool pool(1);
    pool.Run([&] { release.WaitForNotification(); });  // holds the one thread
    for (int i = 0; i < 5; ++i) pool.Run([&] { ++ran; });
    release.Notify();
  }  // joins only after the five queued tasks ran
  EXPECT_EQ(ran, 5);
}

}  // namespace
}  // namespace psync::serve
