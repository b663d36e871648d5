// Validation of one rank's declared plan, and the merged plan of a job generation.
//
// ValidateRankPlan checks a RankPlan on its own (ranges, lengths, duplicates) and answers
// INVALID_ARGUMENT naming the field. JobPlan merges the plans of the ranks that joined one
// generation and refuses, with FAILED_PRECONDITION naming both ranks, a plan that conflicts with
// what was merged before (world size, chunk count, first step, group membership). A refused merge
// changes nothing. Thread-compatible; owned by the JobTracker of its job.
#ifndef PSYNC_SERVER_CORE_PLAN_H_
#define PSYNC_SERVER_CORE_PLAN_H_

#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "server/core/types.h"

namespace psync::core {

struct PlanLimits {
  uint32_t max_world_size = 1 << 20;
  uint32_t max_chunks = 4096;
  uint32_t max_optimizers_per_chunk = 16;
  uint32_t max_groups_per_chunk = 16;
  size_t max_id_length = 128;
  size_t max_name_length = 64;
};

// Checks one rank's plan on its own. OK or INVALID_ARGUMENT naming the field and allowed range.
absl::Status ValidateRankPlan(const RankPlan& plan, const PlanLimits& limits);

// True when two plans of the same rank declare the same thing (incarnation aside).
bool SamePlan(const RankPlan& a, const RankPlan& b);

// Everything the coordinator knows about one chunk once ranks joined.
struct ChunkInfo {
  std::vector<Contributor> contributors;             // sorted
  std::map<std::string, std::vector<RankId>> groups;  // name -> sorted ranks
  std::vector<RankId> members;                       // sorted union of all groups
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

  // nullptr when `rank` has not joined.
  const RankPlan* rank_plan(RankId rank) const;
  // The chunk part `rank` declared for `chunk`, or nullptr.
  const ChunkPart* part(RankId rank, ChunkId chunk) const;
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
  absl::flat_hash_map<RankId, RankPlan> ranks_;
  std::vector<ChunkInfo> chunks_;
  std::vector<std::vector<ChunkId>> synced_chunks_;  // per rank; filled when complete
};

}  // namespace psync::core

#endif  // PSYNC_SERVER_CORE_PLAN_H_
