// RunRanks: thousands of simulated training ranks in a few threads, each speaking the real psync.v1
// protocol to a coordinator (or to node agents that expose the same service).
//
// Every rank joins (Join, a bounded number in flight), opens one Session stream through gRPC's
// callback API (one ClientBidiReactor per rank, no thread per rank) and attaches. Each of the
// `ranks` ranks has `optimizers` optimizers that contribute to every one of `chunks` chunks, and is
// a member of every chunk through one sync group ("dp" of every rank, or groups of `group_size`
// consecutive ranks). Per step, each (chunk, optimizer) check-in of a rank is sent after a delay
// uniform in [0, spread] from the step's start; check-ins of one rank that are due at the same
// moment go in one StagedBatch of at most max_batch_items items. A rank reports SyncDone for each
// directive as it arrives (or once per step, batched) and starts the next step once it holds the
// directives of every chunk (or at the next multiple of step_period, when set). Between the warmup
// steps and the measured steps every rank waits until all ranks finished warmup, so that
// on_measure_start (e.g. a CPU sample of the coordinator) sees no measured traffic; on_measure_end
// runs once every rank holds every directive of the last step and every Ack.
//
// Measurements (one monotonic clock, all ranks in this process): for each (step, chunk), the time
// the last check-in was handed to gRPC (StartWrite) and the time the last member received its
// directive; release latency is the difference, per measured (step, chunk). Correctness counts:
// (step, chunk)s released to every rank, duplicate and unexpected directives, directives whose
// sequence differs between ranks, distinct sequences.
//
// Errors: INVALID_ARGUMENT for bad options (the message names the field); a Join refused, an Ack
// that is not OK, a Session ending early, an Abort or a phase not finishing within `timeout` ends
// the run: every stream is cancelled and the status names the first failure. Blocks the caller;
// not reentrant (one run per call; concurrent calls are independent).
#ifndef PSYNC_BENCH_RANK_DRIVER_H_
#define PSYNC_BENCH_RANK_DRIVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/driver_result.h"

namespace psync::bench {

struct DriverOptions {
  // Rank r connects to targets[r * targets.size() / ranks] (one coordinator, or one per agent).
  std::vector<std::string> targets;
  std::string job_id = "bench";
  uint32_t ranks = 8;
  uint32_t optimizers = 2;
  uint32_t chunks = 8;
  uint64_t warmup_steps = 2;
  uint64_t steps = 20;
  // Each check-in is sent after a delay uniform in [0, spread] from its rank's step start.
  absl::Duration spread = absl::Microseconds(500);
  // Zero: a rank starts its next step once it holds every directive of the current one. Otherwise
  // measured step s starts no earlier than measure_start + s * step_period.
  absl::Duration step_period = absl::ZeroDuration();
  // Check-ins of one rank due at the same moment share a StagedBatch of at most this many items.
  uint32_t max_batch_items = 1;
  // One SyncDoneBatch per rank and step instead of one SyncDone per directive.
  bool batch_sync_done = false;
  // Check-ins and SyncDones ask for lazy acks (SessionUp.lazy_ack), as psync::Client's
  // asynchronous calls do.
  bool lazy_acks = false;
  // TCP connections to each target; 0: one per rank (as separate processes would have).
  uint32_t connections = 0;
  // Sync group size; 0: one group "dp" holding every rank.
  uint32_t group_size = 0;
  uint32_t join_concurrency = 64;
  // Bound on each phase (joins, attaches, warmup, measured steps, close).
  absl::Duration timeout = absl::Seconds(120);
  uint64_t seed = 1;
  std::function<void()> on_measure_start;
  std::function<void()> on_measure_end;

  // One of several processes driving the job's ranks (bench/node_processes.h): this one joins,
  // attaches and drives the ranks r with r % share.workers == share.worker only, each still
  // connecting to targets[r * targets.size() / ranks], so that a node agent's ranks are spread
  // over the processes as separate rank processes would be. A release is complete here once it
  // reached this process's ranks.
  LoadShare share;
};

absl::StatusOr<DriverResult> RunRanks(const DriverOptions& options);

}  // namespace psync::bench

#endif  // PSYNC_BENCH_RANK_DRIVER_H_
