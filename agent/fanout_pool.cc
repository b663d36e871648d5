#include "agent/fanout_pool.h"

#include <cstdint>
#include <utility>

namespace psync::agent {

FanoutPool::FanoutPool(size_t threads) {
  shards_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) shards_.push_back(std::make_unique<serve::BlockingPool>(1));
}

size_t FanoutPool::ShardOf(const void* key) const {
  // Keys are heap addresses: their low bits are alignment, their high bits mostly equal.
  const uint64_t k = reinterpret_cast<uintptr_t>(key) >> 4;
  return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 32) % shards_.size();
}

void FanoutPool::Run(std::vector<Task> tasks) {
  for (Task& t : tasks) {
    if (shards_.empty()) {
      t.run();
    } else {
      shards_[ShardOf(t.key)]->Run(std::move(t.run));
    }
  }
}

}  // namespace psync::agent
