// simulate: runs the deterministic simulation of psync (simulation.h) over many seeds, replays one
// seed with its trace, or runs the negative controls (negative_controls.h).
//
//   simulate --seeds=500                  seeds 1..500; exit 1 if any fails
//   simulate --seeds=500 --replicas=3     the same against 3 coordinator replicas on etcd
//   simulate --seed=42 --trace            one seed, its whole trace
//   simulate --negative_controls          exit 0 only if every injected bug is caught
//
// A failing seed is shrunk (its faults left out one at a time while it still fails) and printed
// with its shortest failing trace; the same command replays it bit for bit (the trace hash says
// so). The last line is a summary: seeds, failures, simulated job-seconds per CPU-second.
#include <ctime>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "tests/simulation/negative_controls.h"
#include "tests/simulation/simulation.h"

ABSL_FLAG(uint64_t, seeds, 100, "seeds to run, from --first_seed");
ABSL_FLAG(uint64_t, first_seed, 1, "the first seed of --seeds");
ABSL_FLAG(int64_t, seed, -1, "run only this seed (with --trace: print its trace)");
ABSL_FLAG(uint64_t, steps, 16, "training steps per run");
ABSL_FLAG(uint32_t, max_crashes, 2, "coordinator crashes a seed may draw (0..N)");
ABSL_FLAG(uint32_t, max_rank_restarts, 2,
          "with --replicas: rank process restarts a seed may draw (0..N)");
ABSL_FLAG(uint32_t, replicas, 0,
          "0: a single coordinator; N: N coordinator replicas on a simulated etcd (with replica "
          "pauses and etcd partitions and slowdowns among the faults)");
ABSL_FLAG(int64_t, agent_window_ms, 0,
          "0: ranks on their own Sessions; N: their messages merged into a node agent's "
          "AgentBatches over N ms (SimCoordinator::MergeLikeAnAgent)");
ABSL_FLAG(uint32_t, ranks_per_node, 0,
          "with --agent_window_ms: 0, one agent for every rank; N, nodes of N ranks each with its "
          "own agent, behind a relay that joins their batches");
ABSL_FLAG(bool, trace, false, "print the trace of --seed (of its shrunk run, if it fails)");
ABSL_FLAG(bool, shrink, true, "shrink a failing seed's faults before printing its trace");
ABSL_FLAG(bool, negative_controls, false,
          "run each injected bug until a seed catches it; exit 0 only if all are caught");

namespace psync::simulation {
namespace {

SimulationOptions BaseOptions() {
  SimulationOptions base;
  base.steps = absl::GetFlag(FLAGS_steps);
  base.rates.max_crashes = absl::GetFlag(FLAGS_max_crashes);
  base.replicas = absl::GetFlag(FLAGS_replicas);
  base.agent_window = absl::Milliseconds(absl::GetFlag(FLAGS_agent_window_ms));
  base.ranks_per_node = absl::GetFlag(FLAGS_ranks_per_node);
  base.rates.max_rank_restarts = absl::GetFlag(FLAGS_max_rank_restarts);
  return base;
}

double CpuSeconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

void PrintTrace(const SimulationResult& r, size_t last_lines) {
  const size_t from = r.trace.size() > last_lines ? r.trace.size() - last_lines : 0;
  if (from > 0) std::cout << "  ... " << from << " earlier lines\n";
  for (size_t i = from; i < r.trace.size(); ++i) std::cout << "  " << r.trace[i] << "\n";
}

// Reports a failing seed: the violation, the shrunk faults and their trace.
void ReportFailure(const SimulationOptions& options, const SimulationResult& result) {
  std::cout << "seed " << options.seed << ": FAILED: " << result.status.message() << "\n"
            << "  plan: " << result.plan << "\n";
  SimulationOptions shortest = options;
  shortest.faults = result.faults;
  if (absl::GetFlag(FLAGS_shrink)) shortest = Shrink(shortest);
  shortest.trace = true;
  const SimulationResult replay = Simulate(shortest);
  std::cout << "  shortest failing run: " << shortest.faults->size() << " of "
            << result.faults.size() << " faults\n";
  for (const Fault& f : *shortest.faults) std::cout << "    " << f.ToString() << "\n";
  std::cout << "  its violation: " << replay.status.message() << "\n  its trace (hash "
            << absl::StrFormat("%016x", replay.trace_hash) << "):\n";
  PrintTrace(replay, absl::GetFlag(FLAGS_trace) ? SIZE_MAX : 60);
}

int RunSeeds() {
  SimulationOptions base = BaseOptions();
  uint64_t first = absl::GetFlag(FLAGS_first_seed);
  uint64_t count = absl::GetFlag(FLAGS_seeds);
  if (absl::GetFlag(FLAGS_seed) >= 0) {
    first = static_cast<uint64_t>(absl::GetFlag(FLAGS_seed));
    count = 1;
  }
  uint64_t failed = 0;
  uint64_t unsafe = 0;
  double simulated = 0;
  uint64_t events = 0;
  const double cpu_start = CpuSeconds();
  for (uint64_t seed = first; seed < first + count; ++seed) {
    SimulationOptions options = base;
    options.seed = seed;
    options.trace = count == 1 && absl::GetFlag(FLAGS_trace);
    const SimulationResult result = Simulate(options);
    simulated += absl::ToDoubleSeconds(result.simulated);
    events += result.events;
    if (!result.status.ok()) {
      ++failed;
      unsafe += result.safety;
      ReportFailure(options, result);
    } else if (count == 1) {
      std::cout << "seed " << seed << ": ok, " << result.faults.size() << " faults, "
                << result.handed_out << " syncs, " << result.crashes << " coordinator crashes, "
                << result.cuts << " cuts, "
                << (options.replicas > 0
                        ? absl::StrFormat("%d lease lapses, %d claims, %d releases and %d reads "
                                          "checked against etcd, ",
                                          result.lease_lapses, result.claims,
                                          result.releases_checked, result.reads_checked)
                        : "")
                << "trace hash " << absl::StrFormat("%016x", result.trace_hash) << "\n";
      if (options.trace) PrintTrace(result, SIZE_MAX);
    }
  }
  const double cpu = CpuSeconds() - cpu_start;
  std::cout << absl::StrFormat(
      "%d seeds, %d failed (%d of them on safety); %.1f simulated job-seconds in %.2f CPU seconds "
      "(%.0f per CPU second), %d events\n",
      count, failed, unsafe, simulated, cpu, cpu > 0 ? simulated / cpu : 0.0, events);
  return failed == 0 ? 0 : 1;
}

int RunControls() {
  const SimulationOptions base = BaseOptions();
  int missed = 0;
  for (const NegativeControl& control : NegativeControls()) {
    const ControlOutcome outcome = RunNegativeControl(control, 1, base);
    if (outcome.caught) {
      std::cout << control.name << ": caught by seed " << outcome.seed << " (" << outcome.seeds
                << " seeds): " << outcome.violation << "\n";
    } else {
      ++missed;
      std::cout << control.name << ": NOT caught in " << outcome.seeds << " seeds (" << control.bug
                << ")"
                << (outcome.violation.empty() ? ""
                                              : "; seed " + std::to_string(outcome.seed) +
                                                    " failed otherwise: " + outcome.violation)
                << "\n";
    }
  }
  return missed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace psync::simulation

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs psync's deterministic simulation: simulate --seeds=N | --seed=S [--trace] | "
      "--negative_controls");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_negative_controls)) return psync::simulation::RunControls();
  return psync::simulation::RunSeeds();
}
