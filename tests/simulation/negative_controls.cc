// NegativeControls and RunNegativeControl; contract: negative_controls.h.
#include "tests/simulation/negative_controls.h"

#include "absl/strings/match.h"
#include "serve/injected_faults.h"

namespace psync::simulation {

std::vector<NegativeControl> NegativeControls() {
  serve::InjectedFaults& f = serve::Injected();
  return {
      {"release_one_early",
       "the release rule releases a chunk when all but one of its contributors staged",
       &f.release_one_early, "early release", 20},
      {"release_again",
       "the release rule forgets a chunk was released; a repeated check-in "
       "releases it again",
       &f.release_again, "released twice", 200},
      {"accept_repeated_directives",
       "the client's notice queue hands a re-sent directive to the training loop again",
       &f.accept_repeated_directives, "a sync executed twice", 200},
      {"skip_fencing",
       "a coordinator replica serves its jobs past its lease's deadline, after etcd expired the "
       "lease",
       &f.skip_fencing, "an unfenced release", 200, 3},
      {"revive_lapsed_lease",
       "a keepalive answered after the deadline revives a replica's lease; a job it refused as "
       "lost is served again at the same epoch",
       &f.revive_lapsed_lease, "a revived lease", 200, 3},
      {"unfenced_reads",
       "a replica answers reads of a job from the state it holds, whether or not it serves the "
       "job",
       &f.unfenced_reads, "an unfenced read", 200, 3},
      {"accept_stale_epoch",
       "a replica serves a job at the older epoch of a key its lapsed lease or previous process "
       "created",
       &f.accept_stale_epoch, "an unfenced release", 500, 3},
      {"repeat_generation_on_move",
       "a new owner merges a resume of a higher generation into the generation it opened for a "
       "fresh joiner",
       &f.repeat_generation_on_move, "a generation number goes down or repeats", 500, 3},
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
    if (control.replicas > 0) options.replicas = control.replicas;
    ++outcome.seeds;
    const SimulationResult result = Simulate(options);
    if (!result.status.ok()) {
      outcome.caught = absl::StrContains(result.status.message(), control.finding);
      outcome.seed = seed;
      outcome.violation = std::string(result.status.message());
      break;
    }
  }
  control.flag->store(false);
  return outcome;
}

}  // namespace psync::simulation
