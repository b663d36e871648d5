// Negative controls: the known bugs of serve/injected_faults.h, each turned on alone while seeds
// run, until one seed's run fails. A control the simulation does not catch within its budget of
// seeds is a blind spot of the simulation.
//
// Not thread-safe: sets process-wide switches (and clears them before returning).
#ifndef PSYNC_TESTS_SIMULATION_NEGATIVE_CONTROLS_H_
#define PSYNC_TESTS_SIMULATION_NEGATIVE_CONTROLS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/simulation/simulation.h"

namespace psync::simulation {

struct NegativeControl {
  std::string name;
  std::string bug;
  std::atomic<bool>* flag;
  uint64_t seed_budget;  // seeds it must be caught within
};

std::vector<NegativeControl> NegativeControls();

struct ControlOutcome {
  bool caught = false;
  uint64_t seed = 0;   // the first seed that caught it
  uint64_t seeds = 0;  // seeds run
  std::string violation;
};

// Runs seeds first_seed, first_seed + 1, ... with `control` on, until one fails or the budget is
// spent.
ControlOutcome RunNegativeControl(const NegativeControl& control, uint64_t first_seed,
                                  const SimulationOptions& base);

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_NEGATIVE_CONTROLS_H_
