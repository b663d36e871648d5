// RunNodes: the coordinator's side of a job whose ranks sit behind node agents, without the ranks:
// each simulated node speaks the AgentSession protocol exactly as psync-agent does for its local
// ranks, so that the coordinator sees the traffic of `ranks` ranks on `ranks / ranks_per_node`
// nodes while the simulation costs this machine one stream per node instead of one per rank.
//
// Every rank joins (Join, `join_concurrency` calls in flight, ranks in a random order as in a real
// job, naming its node "node-<n>"), its node attaches it (one AgentAttach
// per rank). Steps start every `step_period`; each (chunk, optimizer) check-in of a rank is due
// after a delay uniform in [0, spread] from the step's start, and each is one rank message, as a
// rank's StagedBatch of one item would be. Every `tick`, and with `flush_on_complete` also when the
// last local check-in of a (step, chunk) becomes due, each node sends what became due as one
// AgentBatch: SyncDones first, then check-ins merged per (step, chunk, optimizer) into one entry
// naming every message that carries it; while a node's previous write is in flight it keeps
// collecting (as the agent's writer does). A rank's SyncDone of a chunk is due `sync_done_delay`
// after its node read the chunk's directive (the param sync's own time; zero: at once). A rank's
// check-ins of step s+1 wait until its node holds the rank's directives of step s and has sent its
// SyncDones of step s. Warmup steps run first; the measured steps start once every
// warmup release reached every rank.
//
// Release latency of a (step, chunk): the last check-in handed by its rank to its node (its due
// time; the wait for the node's next batch counts) -> the last node received the directive for its
// ranks (the agent's hop to its local ranks is not part of it). Correctness
// counts as in RunRanks: every (step, chunk) released exactly once to every rank, no duplicate,
// unexpected or disagreeing directive.
//
// Errors: INVALID_ARGUMENT for bad options (naming the field); a refused Join, a non-OK AgentAck or
// a rejected message, an Abort, a closed rank or a phase past `timeout` ends the run with a status
// naming the first failure. Blocks the caller; independent calls may run concurrently.
#ifndef PSYNC_BENCH_NODE_DRIVER_H_
#define PSYNC_BENCH_NODE_DRIVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/driver_result.h"
#include "bench/rank_driver.h"
#include "bench/release_records.h"
#include "bench/workload.h"

namespace psync::bench {

struct NodeOptions {
  // Where the nodes' AgentSessions (and Joins) go: node n to targets[n % size]. The coordinator,
  // or relays in front of it (psync-agent processes that relay AgentSessions).
  std::vector<std::string> targets;
  Workload workload;
  uint32_t ranks_per_node = 8;
  uint64_t warmup_steps = 2;
  uint64_t steps = 20;
  absl::Duration spread = absl::Milliseconds(100);
  absl::Duration step_period = absl::Milliseconds(500);  // must be positive
  absl::Duration tick = absl::Milliseconds(1);
  // Also write at once when a check-in completes a (step, chunk) on its node (every local
  // contributor of the chunk handed its check-in), as psync-agent does with a flush window: the
  // check-in that completes a chunk everywhere does not wait for the next tick.
  bool flush_on_complete = true;
  // Batches ask for lazy acks (AgentUp.lazy_ack), as psync-agent does when every message of a
  // batch is an asynchronous report.
  bool lazy_acks = false;
  // Equal SyncDones of a batch share an AgentBatch.merged_sync_dones entry, as psync-agent sends
  // them; false: one IndexedSyncDone each (psync-agent --merge_sync_dones=false).
  bool merge_sync_dones = true;
  // How long a rank's param sync takes: its SyncDone of a chunk is due this long after its node
  // read the chunk's directive, and goes in the node's next batch after that. Zero: the next batch.
  // Keep it under step_period - spread: a rank's next check-ins wait for its SyncDones, and their
  // latency counts from when they were due.
  absl::Duration sync_done_delay = absl::ZeroDuration();
  uint32_t join_concurrency = 64;
  // Threads that build and start the nodes' batches (node n on thread n % pump_threads), so that
  // the simulation keeps its own schedule: DriverResult::pump_lag_ns says how late it ran.
  uint32_t pump_threads = 4;
  absl::Duration timeout = absl::Seconds(120);
  std::function<void()> on_measure_start;
  std::function<void()> on_measure_end;
  // Nodes whose check-ins are due `slow_by` later than the others' in every step (stragglers).
  std::vector<uint32_t> slow_nodes;
  absl::Duration slow_by = absl::ZeroDuration();
  // When set: after the measured steps, one more step in which the check-ins it is true for are
  // never sent, so their chunks wait for them (and stall); the streams stay open for `hold_open`,
  // then the run ends as usual. For looking at the status views of a large job with a few nodes
  // holding chunks back (psync-bench --hold_nodes). That step is not measured; its releases are
  // not waited for (its directives are answered with SyncDone as any other).
  std::function<bool(uint32_t rank, uint32_t chunk, uint32_t optimizer)> withhold;
  absl::Duration hold_open = absl::ZeroDuration();

  // One of several processes simulating the job's nodes (bench/node_processes.h): this one joins,
  // attaches and pumps the nodes n with n % share.workers == share.worker, and their ranks only;
  // a release is complete here once it reached them (which, every rank being a contributor, means
  // it was decided). Not with `withhold`.
  LoadShare share;
};

// Fills the fields of DriverResult that RunRanks fills; messages_up counts AgentUp messages and
// acks AgentAcks.
absl::StatusOr<DriverResult> RunNodes(const NodeOptions& options);

}  // namespace psync::bench

#endif  // PSYNC_BENCH_NODE_DRIVER_H_
