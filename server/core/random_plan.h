// RandomPlan: a random MoE job plan for the property test (job_tracker_property_test.cc), with the
// contributors and members every chunk must have computed from the plan's own definition (not by
// the tracker), the chunks each rank syncs, and the steps every rank skips. Deterministic for a
// given generator state. Test-only; plain data; thread-compatible.
#ifndef PSYNC_SERVER_CORE_RANDOM_PLAN_H_
#define PSYNC_SERVER_CORE_RANDOM_PLAN_H_

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "server/core/invariant_checker.h"
#include "server/core/types.h"

namespace psync::core::testing {

// A random plan, with the expected contributors and members computed from its own definition.
struct RandomPlan {
  uint32_t world_size = 0;
  uint32_t num_chunks = 0;
  uint32_t expert_dp = 0;  // E: size of each expert data-parallel group
  Step first_step = 0;
  Step steps = 0;  // steps in a run, from first_step
  uint32_t history_steps = 0;
  std::vector<RankPlan> plans;
  std::vector<ExpectedChunk> expected;
  std::vector<std::vector<ChunkId>> synced;  // per rank: chunks with contributors it syncs
  std::set<Step> skipped;                    // steps every rank skips
  std::string description;
};

// A plan of 1..16 ranks and 1..6 chunks (mixed, dense-only or expert-only) for a run of `steps`
// steps from first_step.
RandomPlan MakeRandomPlan(std::mt19937& rng, Step steps);

}  // namespace psync::core::testing

#endif  // PSYNC_SERVER_CORE_RANDOM_PLAN_H_
