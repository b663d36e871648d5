// What a run of the benchmark's drivers (RunRanks in rank_driver.h, RunNodes in node_driver.h)
// reports, and the counts both keep while they run.
//
// DriverCounters is thread-safe (atomics, added to by any reactor); SummarizeRun runs once the run
// is over and its streams are done.
#ifndef PSYNC_BENCH_DRIVER_RESULT_H_
#define PSYNC_BENCH_DRIVER_RESULT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/release_records.h"

namespace psync::bench {

struct DriverResult {
  // One per measured (step, chunk) released to every rank, in nanoseconds.
  std::vector<int64_t> release_latency_ns;
  std::vector<int64_t> release_first_latency_ns;  // to the first rank or node that got it
  std::vector<ReleaseTimes> release_times;        // the same releases' raw times
  // Simulated nodes, measured steps: how late the load generator's one pumping thread served each
  // chunk's completing check-in (its due time -> the node's batch built and its write started).
  // Part of every release latency above; a load generator that falls behind shows here, not psync.
  std::vector<int64_t> pump_lag_ns;
  uint64_t releases_expected = 0;  // (warmup_steps + steps) * chunks
  uint64_t releases_complete = 0;  // (step, chunk)s whose directive reached every rank
  uint64_t distinct_sequences = 0;
  uint64_t directives = 0;
  uint64_t duplicate_directives = 0;
  uint64_t unexpected_directives = 0;
  uint64_t sequence_mismatches = 0;
  uint64_t checkins_measured = 0;  // check-ins sent in the measured steps
  uint64_t messages_up = 0;        // SessionUp messages, attach included
  uint64_t messages_down = 0;      // messages read from the coordinator (SessionDown, AgentDown)
  uint64_t acks = 0;
  double join_seconds = 0;
  double attach_seconds = 0;
  double measured_seconds = 0;  // on_measure_start -> on_measure_end
};

// Counted while a run goes on.
struct DriverCounters {
  std::atomic<uint64_t> directives{0};
  std::atomic<uint64_t> duplicate_directives{0};
  std::atomic<uint64_t> unexpected_directives{0};
  std::atomic<uint64_t> sequence_mismatches{0};
  std::atomic<uint64_t> checkins_measured{0};
  std::atomic<uint64_t> messages_up{0};
  std::atomic<uint64_t> messages_down{0};
  std::atomic<uint64_t> acks{0};
};

// Fills the release counts and latencies of *result from the records of a finished run of `ranks`
// ranks (latencies from step `warmup_steps` on), and its counts from `counters`. The timings and
// releases_expected are left as they are.
// Which share of a run's load this process generates when several do (bench/node_processes.h;
// RunRanks and RunNodes say what a share is), and how it meets the others.
struct LoadShare {
  uint32_t worker = 0;
  uint32_t workers = 1;
  // Called as this process reaches "attached" (before the first step), "warm" (before the
  // measured steps; on_measure_start runs after it) and "measured" (after them; before
  // on_measure_end): returns the NowNs() time at which what follows starts, once every process
  // got there. Empty: at once.
  std::function<absl::StatusOr<int64_t>(const char* phase)> rendezvous;
  // Called once the run is over, with the raw records of every (step, chunk) (warmup steps
  // included) and this process's counters, before they are summed up.
  std::function<void(ReleaseRecords& records, const DriverCounters& counters)> on_records;
  // The rendezvous's answer for `phase`, or now without one.
  absl::StatusOr<int64_t> Meet(const char* phase) const {
    return rendezvous ? rendezvous(phase) : NowNs();
  }
};

void SummarizeRun(const ReleaseRecords& records, uint32_t ranks, uint64_t warmup_steps,
                  const DriverCounters& counters, DriverResult* result);

}  // namespace psync::bench

#endif  // PSYNC_BENCH_DRIVER_RESULT_H_
