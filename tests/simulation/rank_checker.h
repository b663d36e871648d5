// RankChecker: the invariants, checked from the ranks' side and from the plan alone, never from
// the coordinator's own account:
//  * no early release: when the training loop of a rank is handed a directive for (step, chunk),
//    every declared contributor of the chunk has sent its check-in for that step;
//  * exactly once: a rank is handed each (step, chunk) at most once over its run (across
//    reconnects and coordinator restarts; a rank restarted after an aborted generation runs again),
//    only for chunks it syncs and steps not skipped, and a
//    coordinator sends one sequence number per (incarnation, owner epoch, generation, step,
//    chunk);
//  * no refused message: in a run without bad input every message a rank sends is accepted;
//  * completion (CheckComplete): every rank was handed every (step, chunk) it syncs, for every
//    step not skipped (and not before a step a fresh Join of it was told to start at).
// The first violation is kept, with the simulated time it was seen at.
//
// Not thread-safe (one simulation thread).
#ifndef PSYNC_TESTS_SIMULATION_RANK_CHECKER_H_
#define PSYNC_TESTS_SIMULATION_RANK_CHECKER_H_

#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "server/core/invariant_checker.h"
#include "tests/simulation/world.h"

namespace psync::simulation {

class RankChecker {
 public:
  RankChecker(World* world, std::vector<core::ExpectedChunk> chunks, std::set<uint64_t> skipped,
              uint64_t first_step, uint64_t end_step);

  void OnStageSent(uint32_t rank, uint64_t step, uint32_t chunk, const std::string& optimizer);
  // Every directive that reaches a rank, before its client's de-duplication.
  void OnDirectiveArrived(uint32_t rank, uint64_t incarnation, const v1::SyncDirective& directive);
  // The rank's client handed (step, chunk) to the training loop, which executes it. `run` counts
  // the rank's restarts (after an aborted generation it runs its steps again).
  void OnHandedOut(uint32_t rank, uint32_t run, uint64_t step, uint32_t chunk);
  void OnRefused(uint32_t rank, const std::string& what, const absl::Status& status);
  // A fresh Join of `rank` (a new client) was told to start at `next_step`: the steps before it
  // are not required of it (it would load them from a checkpoint).
  void OnFreshJoin(uint32_t rank, uint64_t next_step);
  // A finding of the simulation itself (a rank that cannot go on, a run that does not finish).
  void Fail(const std::string& what);
  // A safety violation found by another check (ownership_checker.h, a generation going down).
  void Violation(const std::string& what, bool safety = true);

  absl::Status CheckComplete(uint32_t world_size);
  const absl::Status& first_violation() const { return first_; }
  // Whether the first violation broke a safety invariant (an early, repeated or misdirected
  // release), as opposed to liveness or a refused message.
  bool first_is_safety() const { return first_is_safety_; }
  uint64_t handed_out() const { return handed_out_; }
  uint64_t repeated_arrivals() const { return repeated_arrivals_; }

 private:
  World* const world_;
  const std::vector<core::ExpectedChunk> chunks_;
  const std::set<uint64_t> skipped_;
  const uint64_t first_step_;
  const uint64_t end_step_;
  // (step, chunk, rank, optimizer) of every check-in sent.
  absl::flat_hash_set<std::tuple<uint64_t, uint32_t, uint32_t, std::string>> staged_;
  // (rank, run, step, chunk) handed out, and (rank, step, chunk) of any run.
  absl::flat_hash_set<std::tuple<uint32_t, uint32_t, uint64_t, uint32_t>> handed_;
  absl::flat_hash_set<std::tuple<uint32_t, uint64_t, uint32_t>> handed_any_run_;
  // (incarnation, epoch, generation, step, chunk) -> the sequence number first seen.
  absl::flat_hash_map<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t, uint32_t>, uint64_t>
      sequences_;
  absl::flat_hash_set<std::tuple<uint32_t, uint64_t, uint64_t, uint64_t, uint32_t>> arrivals_;
  // rank -> the latest step a fresh Join of it was told to start at.
  absl::flat_hash_map<uint32_t, uint64_t> started_at_;
  uint64_t handed_out_ = 0;
  uint64_t repeated_arrivals_ = 0;
  absl::Status first_;
  bool first_is_safety_ = false;
};

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_RANK_CHECKER_H_
