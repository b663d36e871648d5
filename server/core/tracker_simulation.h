// Simulation: one randomized run of a JobTracker for the property test
// (job_tracker_property_test.cc). Simulated ranks join, stage in random batches with duplicates,
// vote skips, report SyncDone in random order (also ahead of their own step) and reconnect; an
// InvariantChecker audits every decision, a MergedMirror checks that the same inputs applied in
// merged batches (as a node's) decide the same, and Run() returns the first failure with the
// tracker's state. Deterministic per seed. Test-only; not thread-safe; owns its tracker and
// checker.
#ifndef PSYNC_SERVER_CORE_TRACKER_SIMULATION_H_
#define PSYNC_SERVER_CORE_TRACKER_SIMULATION_H_

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/core/invariant_checker.h"
#include "server/core/job_tracker.h"
#include "server/core/merged_mirror.h"
#include "server/core/random_plan.h"

namespace psync::core::testing {

// One simulated run of a RandomPlan. Returns the first failure, naming what happened.
class Simulation {
 public:
  Simulation(uint32_t seed, RandomPlan plan)
      : rng_(seed),
        plan_(std::move(plan)),
        tracker_("job", Options(plan_)),
        checker_(plan_.expected),
        mirror_(seed ^ 0x5eedu, Options(plan_)),
        ranks_(plan_.world_size) {}

  absl::Status Run();

  // What the runs exercised, summed over seeds; each must be non-zero.
  struct Coverage {
    uint64_t calls = 0;
    uint64_t checkins_while_forming = 0;
    uint64_t duplicate_checkins = 0;
    uint64_t duplicate_sync_dones = 0;
    uint64_t repeated_skips = 0;
    uint64_t skipped_steps = 0;
    uint64_t sync_dones_ahead = 0;  // SyncDone of a step after the rank's own
    uint64_t reconnects = 0;
    uint64_t multi_item_batches = 0;
    uint64_t merged_records = 0;  // the mirror's records that stood for several ranks
  };
  const Coverage& coverage() const { return coverage_; }

 private:
  struct RankSim {
    bool joined = false;
    std::string session;
    Step step = 0;                                          // the step the rank is in
    std::vector<std::pair<ChunkId, std::string>> to_stage;  // not staged yet in `step`
    bool skip_voted = false;
    std::set<std::pair<Step, ChunkId>> directives;  // received, SyncDone not reported
    std::vector<StagedItem> staged;                 // accepted check-ins
    std::vector<SyncDoneItem> done;                 // accepted SyncDones
    std::vector<Step> skips;                        // accepted skip votes
  };

  static TrackerOptions Options(const RandomPlan& plan) {
    TrackerOptions options;
    options.history_steps = plan.history_steps;
    return options;
  }

  size_t Uniform(size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  absl::Status Fail(const std::string& what) const;

  bool IsSkipped(Step s) const { return plan_.skipped.count(s) > 0; }

  bool CanAct(RankId r) const;

  // The oldest step the tracker still retains.
  Step KeepFrom() const;

  void EnterStep(RankId r, Step s);

  // The rank finished its step once it reported SyncDone for every chunk it syncs there.
  void MaybeAdvance(RankId r);

  GroupChecksums Checksums(RankId r, Step step, ChunkId chunk) const;

  // Feeds `out` to the checker and to the simulated ranks.
  absl::Status Apply(const Decisions& out);

  absl::Status CheckSteps() const;

  absl::Status Expect(const absl::Status& status, const std::string& call);

  // The same input to the mirror (merged_mirror.h): joins alone, the rest batched.
  MergedMirror::Call JoinCall(RankId r) const;
  static MergedMirror::Call SkipCall(RankId r, Step step);
  absl::Status Mirror(const MergedMirror::Call& call, const absl::Status& status,
                      const Decisions& out);

  absl::Status Act(RankId r);

  absl::Status DoSkip(RankId r);

  absl::Status DoStage(RankId r);

  absl::Status DoSyncDone(RankId r);

  std::mt19937 rng_;
  const RandomPlan plan_;
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  JobTracker tracker_;
  InvariantChecker checker_;
  MergedMirror mirror_;
  std::vector<RankSim> ranks_;
  uint64_t calls_ = 0;
  std::string last_call_;
  Coverage coverage_;
};

}  // namespace psync::core::testing

#endif  // PSYNC_SERVER_CORE_TRACKER_SIMULATION_H_
