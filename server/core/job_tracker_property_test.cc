// Randomized property test of JobTracker: for many seeds, a random MoE plan and a full simulated
// run of kSteps steps with random interleaving across ranks (joins, check-ins in random batches,
// duplicates, all-rank skips, SyncDone in random order, reconnects). The InvariantChecker audits
// every decision; every call must be answered OK, no violation may be reported, and every step
// must complete; the same inputs applied in merged batches, as a node's, must decide the same
// (merged_mirror.h). Deterministic per seed; a failure prints the seed and the plan.
// Run one seed: bazel test //server/core:job_tracker_property_test
// --test_env=PSYNC_PROPERTY_SEED=<seed>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "server/core/invariant_checker.h"
#include "server/core/job_tracker.h"
#include "server/core/random_plan.h"
#include "server/core/test_util.h"
#include "server/core/tracker_simulation.h"

namespace psync::core {
namespace {

using ::psync::core::testing::MakeRandomPlan;
using ::psync::core::testing::RandomPlan;
using ::psync::core::testing::Simulation;

constexpr int kSeeds = 200;
constexpr Step kSteps = 10;

TEST(JobTrackerPropertyTest, RandomRunsReleaseEveryChunkExactlyOnceAndComplete) {
  std::vector<uint32_t> seeds;
  if (const char* only = std::getenv("PSYNC_PROPERTY_SEED"); only != nullptr) {
    seeds.push_back(static_cast<uint32_t>(std::strtoul(only, nullptr, 10)));
  } else {
    for (uint32_t seed = 1; seed <= kSeeds; ++seed) seeds.push_back(seed);
  }
  Simulation::Coverage total;
  int failures = 0;
  for (uint32_t seed : seeds) {
    std::mt19937 plan_rng(seed);
    RandomPlan plan = MakeRandomPlan(plan_rng, kSteps);
    const std::string description = plan.description;
    Simulation sim(seed * 7919u + 1, std::move(plan));
    const absl::Status status = sim.Run();
    const Simulation::Coverage& c = sim.coverage();
    total.calls += c.calls;
    total.checkins_while_forming += c.checkins_while_forming;
    total.duplicate_checkins += c.duplicate_checkins;
    total.duplicate_sync_dones += c.duplicate_sync_dones;
    total.repeated_skips += c.repeated_skips;
    total.skipped_steps += c.skipped_steps;
    total.sync_dones_ahead += c.sync_dones_ahead;
    total.reconnects += c.reconnects;
    total.multi_item_batches += c.multi_item_batches;
    total.merged_records += c.merged_records;
    if (!status.ok()) {
      ADD_FAILURE() << "seed " << seed << " (rerun with PSYNC_PROPERTY_SEED=" << seed
                    << "): " << status.message() << "\nplan: " << description;
      if (++failures >= 3) break;  // keep the log readable
    }
  }
  std::printf(
      "%zu seeds: %lu calls, %lu check-ins while forming, %lu duplicate check-ins, %lu "
      "duplicate SyncDones, %lu repeated skips, %lu skipped steps, %lu SyncDones ahead, "
      "%lu reconnects, %lu multi-item batches, %lu merged records\n",
      seeds.size(), total.calls, total.checkins_while_forming, total.duplicate_checkins,
      total.duplicate_sync_dones, total.repeated_skips, total.skipped_steps, total.sync_dones_ahead,
      total.reconnects, total.multi_item_batches, total.merged_records);
  if (seeds.size() < kSeeds) return;  // a single seed need not cover every case
  // The runs must have exercised every kind of input they claim to.
  EXPECT_GT(total.calls, seeds.size() * kSteps);
  EXPECT_GT(total.checkins_while_forming, 0u);
  EXPECT_GT(total.duplicate_checkins, 0u);
  EXPECT_GT(total.duplicate_sync_dones, 0u);
  EXPECT_GT(total.repeated_skips, 0u);
  EXPECT_GT(total.skipped_steps, 0u);
  EXPECT_GT(total.sync_dones_ahead, 0u);
  EXPECT_GT(total.reconnects, 0u);
  EXPECT_GT(total.multi_item_batches, 0u);
  EXPECT_GT(total.merged_records, 0u);
}

}  // namespace
}  // namespace psync::core
