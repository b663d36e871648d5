// Test support for the training loop: run a Trainer for a number of steps and keep what each step
// returned. Header-only; thread-compatible (one Trainer per thread).
#ifndef PSYNC_WORKER_TRAINER_TESTING_H_
#define PSYNC_WORKER_TRAINER_TESTING_H_

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "worker/trainer.h"

namespace psync {
namespace worker {

// Runs steps 0 .. steps - 1, appending each step's result to `results`; returns the first error
// (the steps after it are not run), or OK.
inline absl::Status RunSteps(Trainer& trainer, int steps, std::vector<StepResult>* results) {
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<StepResult> result = trainer.RunStep(step);
    if (!result.ok()) return result.status();
    results->push_back(std::move(*result));
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_TRAINER_TESTING_H_
