// What the benchmark's drivers (rank_driver, node_driver) record of every (step, chunk) release
// and how they sum it up: one monotonic clock, the last check-in sent and the first and last
// directive received per (step, chunk), how many ranks got it and with which sequence number.
//
// Thread-safe: records are atomics, written by any reactor; Summarize runs once the run is over.
#ifndef PSYNC_BENCH_RELEASE_RECORDS_H_
#define PSYNC_BENCH_RELEASE_RECORDS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace psync::bench {

// Nanoseconds on the monotonic clock every process of a run shares.
int64_t NowNs();

// target = max(target, value).
void AtomicMax(std::atomic<int64_t>& target, int64_t value);
// target = min(target, value), a target of 0 being unset.
void AtomicMinSet(std::atomic<int64_t>& target, int64_t value);

struct ChunkRecord {
  std::atomic<int64_t> last_send_ns{0};
  std::atomic<int64_t> first_directive_ns{0};
  std::atomic<int64_t> last_directive_ns{0};
  std::atomic<uint32_t> ranks_released{0};
  std::atomic<uint64_t> sequence{0};

  // Notes the sequence number of a directive for this (step, chunk); false when an earlier one
  // carried another.
  // A directive for this (step, chunk) arrived at `now`.
  void NoteDirective(int64_t now) {
    AtomicMinSet(first_directive_ns, now);
    AtomicMax(last_directive_ns, now);
  }

  bool NoteSequence(uint64_t seq) {
    uint64_t seen = 0;
    return sequence.compare_exchange_strong(seen, seq) || seen == seq;
  }
};

// One measured (step, chunk) released to every rank: when its last check-in was sent and when
// the first and last rank (or node) had the directive, on NowNs()'s clock.
struct ReleaseTimes {
  uint64_t step = 0;
  uint32_t chunk = 0;
  int64_t last_send_ns = 0;
  int64_t first_directive_ns = 0;
  int64_t last_directive_ns = 0;
};

struct ReleaseSummary {
  uint64_t complete = 0;            // (step, chunk)s whose directive reached every rank
  uint64_t distinct_sequences = 0;  // among those
  std::vector<int64_t> latency_ns;  // of the complete ones from step warmup_steps on
  // The same, to the first rank (or node) that got the directive: latency_ns minus this is the
  // spread of one release over its ranks.
  std::vector<int64_t> first_latency_ns;
  std::vector<ReleaseTimes> times;  // the same (step, chunk)s, in order
};

class ReleaseRecords {
 public:
  ReleaseRecords(uint64_t steps, uint32_t chunks)
      : chunks_(chunks), records_(new ChunkRecord[steps * chunks]), steps_(steps) {}

  ChunkRecord& at(uint64_t step, uint32_t chunk) { return records_[step * chunks_ + chunk]; }

  ReleaseSummary Summarize(uint32_t ranks, uint64_t warmup_steps) const;

 private:
  const uint32_t chunks_;
  const std::unique_ptr<ChunkRecord[]> records_;
  const uint64_t steps_;
};

}  // namespace psync::bench

#endif  // PSYNC_BENCH_RELEASE_RECORDS_H_
