#include "agent/fanout_pool.h"

#include <pthread.h>

#include <cstdint>
#include <utility>

namespace psync::agent {

FanoutPool::FanoutPool(size_t threads) {
  shards_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    shards_.push_back(std::make_unique<Shard>());
    Shard* shard = shards_.back().get();
    shard->thread = std::thread([shard] { Work(shard); });
    pthread_setname_np(shard->thread.native_handle(), "relay-fanout");
  }
}

FanoutPool::~FanoutPool() {
  for (auto& shard : shards_) {
    absl::MutexLock lock(&shard->mu);
    shard->stopping = true;
    shard->ready.Signal();
  }
  for (auto& shard : shards_) shard->thread.join();
}

size_t FanoutPool::ShardOf(const void* key) const {
  // Keys are heap addresses: their low bits are alignment, their high bits mostly equal.
  const uint64_t k = reinterpret_cast<uintptr_t>(key) >> 4;
  return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 32) % shards_.size();
}

void FanoutPool::Run(std::vector<Task> tasks) {
  if (shards_.empty()) {
    for (Task& t : tasks) t.run();
    return;
  }
  std::vector<std::vector<std::function<void()>>> by_shard(shards_.size());
  for (Task& t : tasks) by_shard[ShardOf(t.key)].push_back(std::move(t.run));
  for (size_t s = 0; s < shards_.size(); ++s) {
    if (by_shard[s].empty()) continue;
    Shard& shard = *shards_[s];
    absl::MutexLock lock(&shard.mu);
    const bool was_empty = shard.queue.empty();
    for (auto& run : by_shard[s]) shard.queue.push_back(std::move(run));
    if (was_empty) shard.ready.Signal();
  }
}

void FanoutPool::Work(Shard* shard) {
  std::deque<std::function<void()>> batch;
  for (;;) {
    {
      absl::MutexLock lock(&shard->mu);
      while (shard->queue.empty() && !shard->stopping) shard->ready.Wait(&shard->mu);
      if (shard->queue.empty()) return;  // stopping, and nothing left
      batch.swap(shard->queue);
    }
    for (auto& run : batch) run();
    batch.clear();
  }
}

}  // namespace psync::agent
