// RunSimulatedJob: a whole training job of simulated ranks against a real coordinator over gRPC.
//
// One thread per rank, each with its own psync::Client. Per step, a rank either skips (every rank
// skips the same steps: an explicit set, plus steps drawn with skip_probability from a hash of
// (seed, step), so all ranks agree) by voting SkipStep and waiting for StepSkipped, or:
//  1. stages each of its (chunk, optimizer) pairs in a random order, each after a random delay up
//     to max_arrival_delay, alone or in StagedBatches of 1..max_batch_items items, and re-sends a
//     check-in with duplicate_probability (the coordinator must count it once);
//  2. waits for the directive of every chunk it is a member of, and reports SyncDone for it with
//     one checksum per group (GroupChecksum(step, chunk, group): all members agree).
// An independent Recorder (sim/recorder.h) notes every send and every delivery and checks the
// invariants afterwards; the report lists what it found.
//
// Errors: INVALID_ARGUMENT for a bad plan or options (the message names the field). Failures
// during the run (a call refused, a timeout) do not fail the function: the run stops (every
// client is closed) and the report lists them in `errors`. Thread-safe (no shared state).
#ifndef PSYNC_SIM_SIM_H_
#define PSYNC_SIM_SIM_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "sim/report.h"
#include "sim/sim_plan.h"

namespace psync::sim {

struct SimOptions {
  // Coordinator address; ignored when `channel` is set (then every rank shares that channel).
  std::string target;
  std::shared_ptr<grpc::Channel> channel;
  std::string job_id = "sim";
  uint64_t steps = 10;
  uint64_t first_step = 0;
  uint64_t seed = 1;
  // Each check-in (and skip vote) is sent after a delay uniform in [0, max_arrival_delay].
  absl::Duration max_arrival_delay = absl::Milliseconds(2);
  // Probability in [0, 1] that a check-in or skip vote is sent a second time.
  double duplicate_probability = 0.0;
  // Steps every rank skips, plus each step with probability skip_probability (seeded).
  std::set<uint64_t> skip_steps;
  double skip_probability = 0.0;
  // 1: one ReportStaged per check-in. More: StagedBatches of a random size in [1, max_batch_items].
  uint32_t max_batch_items = 1;
  // Per client call, and per wait for a directive or StepSkipped.
  absl::Duration call_timeout = absl::Seconds(30);
};

// OK or INVALID_ARGUMENT naming the field.
absl::Status ValidateSimOptions(const SimOptions& options);

// The steps of [first_step, first_step + steps) that every rank skips.
std::set<uint64_t> SkippedSteps(const SimOptions& options);

absl::StatusOr<SimReport> RunSimulatedJob(const SimPlan& plan, const SimOptions& options);

}  // namespace psync::sim

#endif  // PSYNC_SIM_SIM_H_
