// Validation of one rank's declared plan, and the merged plan of a job generation.
//
// ValidateRankPlan checks a RankPlan on its own (ranges, lengths, duplicates) and answers
// INVALID_ARGUMENT naming the field, or RESOURCE_EXHAUSTED naming the field and the limit when the
// plan is well formed but larger than this coordinator takes (max_world_size, max_chunks). JobPlan
// merges the plans of the ranks that joined one generation and refuses, with FAILED_PRECONDITION
// naming both ranks, a plan that conflicts with what was merged before (world size, chunk count,
// first step, group membership). A refused merge changes nothing. Thread-compatible; owned by the
// JobTracker of its job.
#ifndef PSYNC_SERVER_CORE_PLAN_H_
#define PSYNC_SERVER_CORE_PLAN_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "server/core/chunk_slots.h"
#include "server/core/types.h"

namespace psync::core {

// The protocol's ranges (coordinator.proto): a value outside them is INVALID_ARGUMENT whatever
// this coordinator's limits say.
inline constexpr uint32_t kMaxWorldSize = 1 << 20;
inline constexpr uint32_t kMaxChunks = 4096;
// RankPlan.node: at most this many characters, each a letter, a digit or one of "._-:@/".
inline constexpr size_t kMaxNodeName = 128;
// The longest ResumeState::skip_reason (as SkipStep's reason, TrackerOptions::max_reason_length).
inline constexpr size_t kMaxResumeSkipReason = 256;
// The most ResumeState::skipped_steps a resume may list.
inline constexpr size_t kMaxResumeSkippedSteps = 64;
// The most ResumeState::released_ahead a resume may list.
inline constexpr size_t kMaxResumeReleasedAhead = 64;

struct PlanLimits {
  // At most kMaxWorldSize and kMaxChunks (the coordinator refuses to start with more).
  uint32_t max_world_size = kMaxWorldSize;
  uint32_t max_chunks = kMaxChunks;
  uint32_t max_optimizers_per_chunk = 16;
  uint32_t max_groups_per_chunk = 16;
  size_t max_id_length = 128;
  size_t max_name_length = 64;
};

// Checks one rank's plan on its own. OK; INVALID_ARGUMENT naming the field and allowed range; or
// RESOURCE_EXHAUSTED ("world_size 9 exceeds this coordinator's max_world_size=8", likewise
// num_chunks and max_chunks). The other limits are the protocol's own, and so INVALID_ARGUMENT.
absl::Status ValidateRankPlan(const RankPlan& plan, const PlanLimits& limits);

// The first difference between what two plans of the same rank declare (incarnation aside), as
// "<field> <in a> -> <in b>" (e.g. "chunks[0].optimizers [dense,expert] -> [dense]"); empty when
// they declare the same thing. Group members compare as sets.
std::string PlanDifference(const RankPlan& a, const RankPlan& b);
// True when PlanDifference(a, b) is empty.
bool SamePlan(const RankPlan& a, const RankPlan& b);

// Everything the coordinator knows about one chunk once ranks joined.
struct ChunkInfo {
  // Sorted contributors while ranks join; a B-tree so that ranks joining in any order insert in
  // O(log n) (a sorted vector made 16,384 joins in random order quadratic). Emptied once the plan
  // is complete (`slots` holds them then): read them through ForEachContributor.
  absl::btree_set<Contributor> contributors_while_joining;
  std::map<std::string, std::vector<RankId>> groups;  // name -> sorted ranks
  // rank -> names of the groups above that list it (so that a join checks its own groups, not all
  // of the chunk's: thousands of groups of 8 made every join O(groups)). Only joins read it:
  // emptied once the plan is complete.
  absl::flat_hash_map<RankId, std::vector<std::string>> groups_listing;
  std::vector<RankId> members;  // sorted union of all groups
  // Positions of the contributors and members, built once the plan is complete (empty before):
  // per-step state is kept in arrays indexed by them (chunk_sets.h).
  ChunkSlots slots;
  bool complete = false;  // slots are built, the joining-only structures above are emptied

  size_t num_contributors() const {
    return complete ? slots.num_contributors() : contributors_while_joining.size();
  }
  // fn(const Contributor&) for each contributor, in sorted order.
  template <typename Fn>
  void ForEachContributor(Fn fn) const {
    if (!complete) {
      for (const Contributor& c : contributors_while_joining) fn(c);
      return;
    }
    for (uint32_t s = 0; s < slots.num_contributors(); ++s) fn(slots.ContributorAt(s));
  }
  const std::vector<std::string>& GroupsListing(RankId rank) const {
    static const std::vector<std::string> kNone;
    auto it = groups_listing.find(rank);
    return it == groups_listing.end() ? kNone : it->second;
  }
};

class JobPlan {
 public:
  JobPlan() = default;

  // Checks `plan` (already validated) against the ranks merged so far; on OK adds it.
  // FAILED_PRECONDITION naming the conflict otherwise, and nothing changes.
  absl::Status Merge(const RankPlan& plan);

  bool empty() const { return ranks_.empty(); }
  // Every rank in [0, world_size) has joined.
  bool complete() const { return !ranks_.empty() && ranks_.size() == world_size_; }
  uint32_t world_size() const { return world_size_; }
  uint32_t num_chunks() const { return num_chunks_; }
  Step first_step() const { return first_step_; }
  size_t ranks_joined() const { return ranks_.size(); }

  // nullptr when `rank` has not joined. Its groups carry their names only: the members of each
  // group are kept once, in chunk(c).groups (a world-wide group stored with every rank's plan made
  // the plan O(ranks²) in memory).
  const RankPlan* rank_plan(RankId rank) const;
  // The chunk part `rank` declared for `chunk` (groups by name only, as above), or nullptr.
  const ChunkPart* part(RankId rank, ChunkId chunk) const;
  // How `plan` differs from what its rank declared when it joined (incarnation aside), as
  // PlanDifference says it; empty when it declares the same thing.
  std::string DifferenceFromJoined(const RankPlan& plan) const;
  // Contributors and groups of `chunk` as merged so far. Requires chunk < num_chunks().
  const ChunkInfo& chunk(ChunkId chunk) const { return chunks_[chunk]; }
  // Chunks whose sync `rank` takes part in and that have at least one contributor (complete plans).
  const std::vector<ChunkId>& synced_chunks(RankId rank) const;

 private:
  absl::Status CheckGroups(const RankPlan& plan) const;

  uint32_t world_size_ = 0;
  uint32_t num_chunks_ = 0;
  Step first_step_ = 0;
  RankId first_rank_ = 0;
  absl::flat_hash_map<RankId, std::unique_ptr<const RankPlan>> ranks_;
  std::vector<ChunkInfo> chunks_;
  // When complete: each rank's synced chunks as an index into the distinct lists (most jobs have
  // one, or one per pipeline stage), so that a rank's list is read from a few hot vectors instead
  // of one vector per rank wherever in memory it was allocated.
  std::vector<std::vector<ChunkId>> synced_lists_;
  std::vector<uint32_t> synced_list_of_;  // per rank: into synced_lists_
};

}  // namespace psync::core

#endif  // PSYNC_SERVER_CORE_PLAN_H_
