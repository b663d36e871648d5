// SimPlan: the shape of a simulated MoE training job, and the Join plan of each of its ranks.
//
// W ranks, C model chunks, expert-parallel size E (W % E == 0). A chunk may hold dense parameters,
// expert parameters, both (the default: every chunk both) or neither. For every rank and chunk:
//  * optimizers: "dense" if the chunk has dense parameters, "expert" if it has expert parameters;
//  * sync groups: "dp" = every rank (if dense), "edp<k>" with k = rank % E = the ranks r with
//    r % E == k, i.e. the expert data-parallel group of size W / E (if expert).
// A chunk with neither kind of parameter is not listed in any rank's plan.
//
// Plain value type; thread-compatible.
#ifndef PSYNC_SIM_SIM_PLAN_H_
#define PSYNC_SIM_SIM_PLAN_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace psync::sim {

// One optimizer of one rank: the unit that checks in.
struct SimContributor {
  uint32_t rank = 0;
  std::string optimizer;
};

struct SimPlan {
  uint32_t world_size = 8;
  uint32_t num_chunks = 4;
  uint32_t expert_parallel = 2;
  // Chunks with dense / expert parameters; nullopt means every chunk.
  std::optional<std::set<uint32_t>> dense_chunks;
  std::optional<std::set<uint32_t>> expert_chunks;

  // OK, or INVALID_ARGUMENT naming the field: world_size >= 1, num_chunks >= 1,
  // expert_parallel >= 1 dividing world_size, listed chunks < num_chunks.
  absl::Status Validate() const;

  bool HasDense(uint32_t chunk) const;
  bool HasExpert(uint32_t chunk) const;

  // The Join plan of `rank` (no incarnation: the client picks one). Requires Validate().ok().
  psync::v1::JoinRequest JoinRequestFor(uint32_t rank, const std::string& job_id,
                                        uint64_t first_step) const;

  // The optimizers of `rank` that stage `chunk` (each rank has the same ones).
  std::vector<std::string> Optimizers(uint32_t chunk) const;
  // Every contributor of `chunk`, by rank then optimizer.
  std::vector<SimContributor> Contributors(uint32_t chunk) const;
  // The sync groups `rank` belongs to in `chunk`, by name ("dp" first).
  std::vector<std::string> GroupsOf(uint32_t rank, uint32_t chunk) const;
  // Ranks that receive the directive of `chunk`: the union of its groups, ascending.
  std::vector<uint32_t> Members(uint32_t chunk) const;
  // Chunks whose directive `rank` receives, ascending.
  std::vector<uint32_t> MemberChunks(uint32_t rank) const;
};

// The checksum every member of `group` reports for (step, chunk): deterministic, so all agree.
uint64_t GroupChecksum(uint64_t step, uint32_t chunk, const std::string& group);
// The shard checksum a contributor stages with: deterministic, so a duplicate carries the same.
uint64_t ShardChecksum(uint64_t step, uint32_t chunk, uint32_t rank, const std::string& optimizer);

}  // namespace psync::sim

#endif  // PSYNC_SIM_SIM_PLAN_H_
