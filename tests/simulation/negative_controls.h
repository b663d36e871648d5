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
  std::string finding;    // what the violation that catches it says
  uint64_t seed_budget;   // seeds it must be caught within
  uint32_t replicas = 0;  // run against this many coordinator replicas (0: the base's setting)
};

std::vector<NegativeControl> NegativeControls();

struct ControlOutcome {
  bool caught = false;
  uint64_t seed = 0;   // the first seed that caught it
  uint64_t seeds = 0;  // seeds run
  std::string violation;
};

// Runs seeds first_seed, first_seed + 1, ... with `control` on (and its replicas), until one fails
// with the control's finding or the budget is spent. (A run failing for another reason is not a
// catch: it is reported as the violation seen, with caught false.)
ControlOutcome RunNegativeControl(const NegativeControl& control, uint64_t first_seed,
                                  const SimulationOptions& base);

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_NEGATIVE_CONTROLS_H_
