// BlockingPool: a few threads of its own for calls that may wait on I/O, e.g. a Join whose claim
// of a job waits for etcd on a coordinator replica, so that gRPC's callback threads (which must
// not block: while they wait, no other call of the server is served) hand such calls over and
// return at once.
//
// Thread-safe. Run() never blocks. The destructor runs every task queued, then joins the threads.
#ifndef PSYNC_SERVE_BLOCKING_POOL_H_
#define PSYNC_SERVE_BLOCKING_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace psync::serve {

class BlockingPool {
 public:
  // `threads` >= 1.
  explicit BlockingPool(int threads);
  ~BlockingPool();
  BlockingPool(const BlockingPool&) = delete;
  BlockingPool& operator=(const BlockingPool&) = delete;

  // Queues `task`; one of the pool's threads runs it, in the order queued.
  void Run(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Work() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // set by the constructor only
};

}  // namespace psync::serve

#endif  // PSYNC_SERVE_BLOCKING_POOL_H_
