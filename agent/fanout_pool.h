// FanoutPool: runs tasks on a fixed set of threads, the tasks of one key in the order they were
// handed over (a key always goes to the same thread). A relay hands it each downstream agent's
// share of a coordinator message: writing a share (serializing it, and the socket write gRPC makes
// inline in StartWrite) costs tens of microseconds, so one thread writing a release to a few
// hundred agents one after another holds the last of them for milliseconds; spread over a few
// threads the shares go out side by side, each agent's still in order. Unlike the coordinator's
// FanOut (server/owner/fan_out.h), whose Run returns once every slice ran, Run here returns at
// once: the relay's reader goes on to the coordinator's next message while the shares are
// written, and a key's order holds across messages.
//
// With 0 threads, Run calls every task at once on the caller's thread, in order.
//
// Thread-safety: thread-safe. Ownership: owns its threads; the destructor runs every task handed
// over, then joins them. A task must not call Run on the pool that runs it.
#ifndef PSYNC_AGENT_FANOUT_POOL_H_
#define PSYNC_AGENT_FANOUT_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace psync::agent {

class FanoutPool {
 public:
  struct Task {
    const void* key = nullptr;  // whose: tasks of one key run in order, on one thread
    std::function<void()> run;
  };

  explicit FanoutPool(size_t threads);
  ~FanoutPool();
  FanoutPool(const FanoutPool&) = delete;
  FanoutPool& operator=(const FanoutPool&) = delete;

  // Hands `tasks` over together: each thread is woken at most once for them.
  void Run(std::vector<Task> tasks);

  size_t threads() const { return shards_.size(); }

 private:
  struct Shard {
    absl::Mutex mu;
    absl::CondVar ready;
    std::deque<std::function<void()>> queue ABSL_GUARDED_BY(mu);
    bool stopping ABSL_GUARDED_BY(mu) = false;
    std::thread thread;
  };
  size_t ShardOf(const void* key) const;
  static void Work(Shard* shard);

  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_FANOUT_POOL_H_
