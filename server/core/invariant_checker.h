// InvariantChecker: audits the decisions of a JobTracker against an independently built
// description of the expected plan, for use in tests of every layer.
//
// The expected plan (per chunk: the contributors that must check in and the ranks that take part
// in the chunk's sync) is computed by the caller from its own plan definition, never read from the
// tracker. The caller feeds every input the tracker accepted (OnStaged, after an OK Stage) and
// every Decisions the tracker produced (OnDecisions), in the order they happened. The checker then
// verifies, across generations:
//  * No early release: a kRelease event or a SyncDirective for (generation, step, chunk) appears
//    only after every expected contributor's check-in for it was accepted, and only for chunks
//    that have contributors.
//  * Exactly once: at most one kRelease per (generation, step, chunk); every SyncDirective
//    matches that release (generation, step, chunk, sequence); each member gets exactly one
//    delivery of it, and no other rank gets one. A release of a skipped step is a violation.
//  * Sequence numbers of releases strictly increase.
// CheckComplete, after a run, verifies that every (step, chunk) with contributors of the steps
// that were not skipped was released and delivered to every member.
//
// Errors: the first violation is returned as FAILED_PRECONDITION (INVALID_ARGUMENT for a malformed
// expected plan) with a message naming generation, step, chunk and rank; it is sticky: every later
// call returns it again. Thread-compatible.
#ifndef PSYNC_SERVER_CORE_INVARIANT_CHECKER_H_
#define PSYNC_SERVER_CORE_INVARIANT_CHECKER_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/core/types.h"

namespace psync::core {

// What one chunk is expected to look like, from the caller's own plan definition.
struct ExpectedChunk {
  std::vector<Contributor> contributors;  // any order; empty: the chunk is never synced
  std::vector<RankId> members;            // union of the chunk's sync groups; any order
};

class InvariantChecker {
 public:
  // `chunks[c]` describes chunk c.
  explicit InvariantChecker(std::vector<ExpectedChunk> chunks);

  // Records the items of a Stage call the tracker answered OK (duplicates included).
  void OnStaged(RankId rank, uint64_t generation, absl::Span<const StagedItem> items);

  // Checks one Decisions output. OK, or the first violation seen so far.
  absl::Status OnDecisions(const Decisions& decisions);

  // After a run: every step of `steps` that is not in `skipped_steps` had each chunk with
  // contributors released in `generation` and delivered to all its members; no step of
  // `skipped_steps` had a release. OK, or the first violation seen so far.
  absl::Status CheckComplete(uint64_t generation, absl::Span<const Step> steps,
                             absl::Span<const Step> skipped_steps);

  // Releases seen so far (all generations).
  size_t releases() const { return releases_.size(); }

 private:
  using Key = std::tuple<uint64_t, Step, ChunkId>;  // generation, step, chunk
  struct Release {
    uint64_t sequence = 0;
    std::set<RankId> delivered;
  };

  absl::Status Fail(std::string message);
  absl::Status CheckRelease(const Event& event);
  absl::Status CheckDirective(RankId rank, const SyncDirective& directive);
  absl::Status CheckStepSkipped(const StepSkipped& skipped);

  // Constant after construction.
  std::vector<ExpectedChunk> chunks_;  // contributors and members sorted
  absl::Status init_status_;

  absl::Status first_violation_;
  std::map<Key, std::set<Contributor>> staged_;
  std::map<Key, Release> releases_;
  std::set<std::pair<uint64_t, Step>> skipped_;  // (generation, step) announced as skipped
  uint64_t last_sequence_ = 0;
};

}  // namespace psync::core

#endif  // PSYNC_SERVER_CORE_INVARIANT_CHECKER_H_
