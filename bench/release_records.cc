#include "bench/release_records.h"

#include <algorithm>
#include <chrono>

namespace psync::bench {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void AtomicMax(std::atomic<int64_t>& target, int64_t value) {
  int64_t current = target.load(std::memory_order_relaxed);
  while (value > current &&
         !target.compare_exchange_weak(current, value, std::memory_order_relaxed)) {
  }
}

void AtomicMinSet(std::atomic<int64_t>& target, int64_t value) {
  int64_t current = target.load(std::memory_order_relaxed);
  while ((current == 0 || value < current) &&
         !target.compare_exchange_weak(current, value, std::memory_order_relaxed)) {
  }
}

ReleaseSummary ReleaseRecords::Summarize(uint32_t ranks, uint64_t warmup_steps) const {
  ReleaseSummary out;
  std::vector<uint64_t> sequences;
  for (uint64_t step = 0; step < steps_; ++step) {
    for (uint32_t c = 0; c < chunks_; ++c) {
      const ChunkRecord& rec = records_[step * chunks_ + c];
      if (rec.ranks_released.load() != ranks) continue;
      ++out.complete;
      sequences.push_back(rec.sequence.load());
      if (step >= warmup_steps) {
        out.latency_ns.push_back(rec.last_directive_ns.load() - rec.last_send_ns.load());
        out.first_latency_ns.push_back(rec.first_directive_ns.load() - rec.last_send_ns.load());
        out.times.push_back({step, c, rec.last_send_ns.load(), rec.first_directive_ns.load(),
                             rec.last_directive_ns.load()});
      }
    }
  }
  std::sort(sequences.begin(), sequences.end());
  out.distinct_sequences = std::unique(sequences.begin(), sequences.end()) - sequences.begin();
  return out;
}

}  // namespace psync::bench
