// NegativeControls and RunNegativeControl; contract: negative_controls.h.
#include "tests/simulation/negative_controls.h"

#include "serve/injected_faults.h"

namespace psync::simulation {

std::vector<NegativeControl> NegativeControls() {
  serve::InjectedFaults& f = serve::Injected();
  return {
      {"release_one_early",
       "the release rule releases a chunk when all but one of its contributors staged",
       &f.release_one_early, 20},
      {"release_again",
       "the release rule forgets a chunk was released; a repeated check-in "
       "releases it again",
       &f.release_again, 200},
      {"accept_repeated_directives",
       "the client's notice queue hands a re-sent directive to the training loop again",
       &f.accept_repeated_directives, 200},
  };
}

ControlOutcome RunNegativeControl(const NegativeControl& control, uint64_t first_seed,
                                  const SimulationOptions& base) {
  ControlOutcome outcome;
  control.flag->store(true);
  for (uint64_t seed = first_seed; seed < first_seed + control.seed_budget; ++seed) {
    SimulationOptions options = base;
    options.seed = seed;
    options.faults.reset();
    ++outcome.seeds;
    const SimulationResult result = Simulate(options);
    if (!result.status.ok()) {
      outcome.caught = true;
      outcome.seed = seed;
      outcome.violation = std::string(result.status.message());
      break;
    }
  }
  control.flag->store(false);
  return outcome;
}

}  // namespace psync::simulation
