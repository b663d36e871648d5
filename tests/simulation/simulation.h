// Simulation: one run of the whole system in a simulated world, from a seed. A random job (dense
// and expert optimizers, expert data-parallel groups, skipped steps: core::testing::RandomPlan)
// runs on simulated ranks (sim_rank.h) against a simulated coordinator running the real owner
// (sim_coordinator.h), or against several coordinator replicas sharing a simulated etcd
// (sim_replica.h, sim_etcd.h) while a reader asks them for the job's status, over a simulated
// network (network.h), while the seed's faults (faults.h) hit it; a RankChecker (rank_checker.h)
// checks every invariant from the ranks' side, and an OwnershipChecker (ownership_checker.h) the
// replicas' against etcd. After the faults' window the faults stop, and every step must then
// complete.
//
// The same options replay the same run, event for event (World): a failing seed is a bug report.
// Shrink re-runs a failing seed with fewer faults, one left out at a time, and keeps the smallest
// list that still fails. Not thread-safe; each run owns everything it creates.
#ifndef PSYNC_TESTS_SIMULATION_SIMULATION_H_
#define PSYNC_TESTS_SIMULATION_SIMULATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tests/simulation/faults.h"

namespace psync::simulation {

struct SimulationOptions {
  uint64_t seed = 1;
  uint64_t steps = 16;
  bool trace = false;                        // keep the trace's lines (it is always hashed)
  std::optional<std::vector<Fault>> faults;  // unset: the seed's own draw
  FaultRates rates;
  // 0: a single coordinator. N: N coordinator replicas on a simulated etcd (lease TTL 2 s, margin
  // 0.5 s), which the ranks know as their target list.
  uint32_t replicas = 0;
  // After the faults stop, every step must complete within this (simulated) time.
  absl::Duration settle = absl::Seconds(60);
  // Zero: each rank's message is applied as it arrives, as on its own Session. Positive: the
  // coordinators apply the ranks' check-ins, skips and SyncDones as a node agent sends them,
  // merged into AgentBatches over this window (SimCoordinator::MergeLikeAnAgent).
  absl::Duration agent_window = absl::ZeroDuration();
  // With agent_window: 0, one agent for every rank; N, nodes of N ranks (rank r on node r / N),
  // each with its own agent, behind a relay that joins their batches.
  uint32_t ranks_per_node = 0;
};

struct SimulationResult {
  absl::Status status;  // OK, or the first violation
  bool safety = false;  // the first violation broke no-early-release or exactly-once
  std::string plan;     // the job's plan, described
  std::vector<Fault> faults;
  uint64_t trace_hash = 0;
  std::vector<std::string> trace;  // with SimulationOptions::trace
  absl::Duration simulated;        // simulated time the run took
  uint64_t events = 0;
  uint64_t handed_out = 0;         // directives handed to the ranks' training loops
  uint64_t repeated_arrivals = 0;  // directives that reached a rank again (de-duplicated)
  uint64_t messages = 0;
  uint64_t cuts = 0;
  uint64_t crashes = 0;
  // With agent_window: the AgentBatches applied and the ranks' messages in them.
  uint64_t agent_batches = 0;
  uint64_t agent_batch_messages = 0;
  // With replicas.
  uint64_t lease_lapses = 0;
  uint64_t claims = 0;
  uint64_t releases_checked = 0;
  uint64_t reads_checked = 0;
};

SimulationResult Simulate(const SimulationOptions& options);

// `failing` (whose run fails) with as few of its faults as still make the run fail.
SimulationOptions Shrink(const SimulationOptions& failing);

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_SIMULATION_H_
