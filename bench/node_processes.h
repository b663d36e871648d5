// Several processes generating one job's load (psync-bench --node_processes): at 131,072 ranks
// one process holding 16,384 node streams cannot keep up reading them (docs/performance.md, "The
// way down, timed at every hop"), and one process reading 1,024 ranks' own Sessions is the
// slowest hop behind real node agents, so the simulated nodes (node n in process n % processes,
// NodeOptions::share) or the ranks (rank r in process r % processes, DriverOptions::share) are
// spread over child processes of psync-bench, each joining, attaching and driving its own share
// on one schedule.
//
// The processes meet at three points through files in a fresh folder (the run's; nothing else
// writes there): each writes "<phase>.<worker>" on reaching "attached", "warm" or "measured" and
// waits for "<phase>.go", which the parent writes once every worker got there, holding the
// NowNs() time the next phase starts at (the monotonic clock is the host's, shared by every
// process). The parent runs on_measure_start at "warm" and on_measure_end at "measured". At the
// end each worker writes "result.<worker>": its counters, join and attach times, pump lags and
// the raw record of every (step, chunk); the parent merges them (latest check-in and last
// directive, first directive, ranks summed; two workers naming different sequence numbers for one
// (step, chunk) count as a sequence mismatch) and sums the run up as RunNodes does.
//
// Errors: a worker that exits early or fails ends the run with its status (its log names why); a
// meeting point not reached within the run's timeout is DEADLINE_EXCEEDED naming it. Blocks the
// caller. Thread-compatible.
#ifndef PSYNC_BENCH_NODE_PROCESSES_H_
#define PSYNC_BENCH_NODE_PROCESSES_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/driver_result.h"
#include "bench/node_driver.h"
#include "bench/rank_driver.h"
#include "bench/release_records.h"

namespace psync::bench {

struct NodeProcessOptions {
  uint32_t processes = 2;
  // The command line of worker i (argv[0] is the binary); its NodeOptions must be the run's with
  // worker i of `processes` (psync-bench passes its own flags and --node_worker=i).
  std::function<std::vector<std::string>(uint32_t worker)> worker_argv;
  // A fresh folder for the meeting points and results; each worker's log goes there too.
  std::string dir;
  // Called with the workers' pids once they are started (to sample their CPU).
  std::function<void(const std::vector<pid_t>&)> on_started;
};

// What the parent needs to know of the run: its shape, its bound on each meeting point and what
// runs when the measured steps start and end.
struct WorkerRun {
  uint32_t ranks = 0;
  uint32_t chunks = 0;
  uint64_t warmup_steps = 0;
  uint64_t steps = 0;
  absl::Duration timeout;
  std::function<void()> on_measure_start;
  std::function<void()> on_measure_end;
};
WorkerRun WorkerRunOf(const NodeOptions& nodes);
WorkerRun WorkerRunOf(const DriverOptions& ranks);

// The parent's side: starts the workers, meets them, merges their results.
absl::StatusOr<DriverResult> RunWorkerProcesses(const WorkerRun& run,
                                                const NodeProcessOptions& options);

// A worker's side: the rendezvous for NodeOptions::rendezvous (waiting at most `timeout` at each
// meeting point), and its result file.
std::function<absl::StatusOr<int64_t>(const char* phase)> WorkerRendezvous(const std::string& dir,
                                                                           uint32_t worker,
                                                                           absl::Duration timeout);
// The records and counters, as NodeOptions::on_records hands them over, in the result file's form.
std::string FormatWorkerRecords(ReleaseRecords& records, uint64_t steps, uint32_t chunks,
                                const DriverCounters& counters);
// Writes dir/result.<worker> (atomically) from what FormatWorkerRecords made and the run's times.
absl::Status WriteWorkerResult(const std::string& dir, uint32_t worker, const std::string& records,
                               const DriverResult& result);

}  // namespace psync::bench

#endif  // PSYNC_BENCH_NODE_PROCESSES_H_
