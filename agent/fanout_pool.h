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
// Built on single-thread serve::BlockingPools, one per thread, a key always on the same one.
//
// Thread-safety: thread-safe. Ownership: owns its threads; the destructor runs every task handed
// over, then joins them. A task must not call Run on the pool that runs it.
#ifndef PSYNC_AGENT_FANOUT_POOL_H_
#define PSYNC_AGENT_FANOUT_POOL_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "serve/blocking_pool.h"

namespace psync::agent {

class FanoutPool {
 public:
  struct Task {
    const void* key = nullptr;  // whose: tasks of one key run in order, on one thread
    std::function<void()> run;
  };

  explicit FanoutPool(size_t threads);
  FanoutPool(const FanoutPool&) = delete;
  FanoutPool& operator=(const FanoutPool&) = delete;

  // Hands `tasks` over, each to its key's thread.
  void Run(std::vector<Task> tasks);

  size_t threads() const { return shards_.size(); }

 private:
  size_t ShardOf(const void* key) const;

  // One thread each: a shard runs its tasks in the order queued.
  std::vector<std::unique_ptr<serve::BlockingPool>> shards_;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_FANOUT_POOL_H_
