#include "sim/sim_plan.h"

#include "absl/strings/str_cat.h"

namespace psync::sim {
namespace {

constexpr char kDense[] = "dense";
constexpr char kExpert[] = "expert";
constexpr char kDenseGroup[] = "dp";

// 64-bit FNV-1a over bytes, then a splitmix64 finish: stable across processes and builds.
uint64_t Mix(uint64_t h) {
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

uint64_t Fnv(uint64_t h, const std::string& bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t Fnv(uint64_t h, uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    h ^= (value >> (8 * i)) & 0xff;
    h *= 0x100000001b3ULL;
  }
  return h;
}

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;

std::string ExpertGroup(uint32_t k) { return absl::StrCat("edp", k); }

absl::Status CheckChunks(const std::optional<std::set<uint32_t>>& chunks, uint32_t num_chunks,
                         const char* field) {
  if (!chunks.has_value() || chunks->empty()) return absl::OkStatus();
  if (*chunks->rbegin() >= num_chunks) {
    return absl::InvalidArgumentError(absl::StrCat(field, " lists chunk ", *chunks->rbegin(),
                                                   ", out of range [0, ", num_chunks, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SimPlan::Validate() const {
  if (world_size < 1) return absl::InvalidArgumentError("world_size must be >= 1");
  if (num_chunks < 1) return absl::InvalidArgumentError("num_chunks must be >= 1");
  if (expert_parallel < 1 || world_size % expert_parallel != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expert_parallel must be >= 1 and divide world_size ", world_size, " (got ",
                     expert_parallel, ")"));
  }
  if (auto s = CheckChunks(dense_chunks, num_chunks, "dense_chunks"); !s.ok()) return s;
  return CheckChunks(expert_chunks, num_chunks, "expert_chunks");
}

bool SimPlan::HasDense(uint32_t chunk) const {
  return chunk < num_chunks && (!dense_chunks.has_value() || dense_chunks->count(chunk) > 0);
}

bool SimPlan::HasExpert(uint32_t chunk) const {
  return chunk < num_chunks && (!expert_chunks.has_value() || expert_chunks->count(chunk) > 0);
}

std::vector<std::string> SimPlan::Optimizers(uint32_t chunk) const {
  std::vector<std::string> out;
  if (HasDense(chunk)) out.push_back(kDense);
  if (HasExpert(chunk)) out.push_back(kExpert);
  return out;
}

std::vector<SimContributor> SimPlan::Contributors(uint32_t chunk) const {
  std::vector<SimContributor> out;
  const std::vector<std::string> optimizers = Optimizers(chunk);
  for (uint32_t r = 0; r < world_size; ++r) {
    for (const std::string& o : optimizers) out.push_back({r, o});
  }
  return out;
}

std::vector<std::string> SimPlan::GroupsOf(uint32_t rank, uint32_t chunk) const {
  std::vector<std::string> out;
  if (HasDense(chunk)) out.push_back(kDenseGroup);
  if (HasExpert(chunk)) out.push_back(ExpertGroup(rank % expert_parallel));
  return out;
}

std::vector<uint32_t> SimPlan::Members(uint32_t chunk) const {
  std::vector<uint32_t> out;
  // Both kinds of group cover every rank between them.
  if (!HasDense(chunk) && !HasExpert(chunk)) return out;
  for (uint32_t r = 0; r < world_size; ++r) out.push_back(r);
  return out;
}

std::vector<uint32_t> SimPlan::MemberChunks(uint32_t rank) const {
  std::vector<uint32_t> out;
  if (rank >= world_size) return out;
  for (uint32_t c = 0; c < num_chunks; ++c) {
    if (HasDense(c) || HasExpert(c)) out.push_back(c);
  }
  return out;
}

psync::v1::JoinRequest SimPlan::JoinRequestFor(uint32_t rank, const std::string& job_id,
                                               uint64_t first_step) const {
  psync::v1::JoinRequest request;
  request.set_job_id(job_id);
  request.set_world_size(world_size);
  request.set_rank(rank);
  request.set_num_chunks(num_chunks);
  request.set_first_step(first_step);
  for (uint32_t c = 0; c < num_chunks; ++c) {
    if (!HasDense(c) && !HasExpert(c)) continue;
    psync::v1::ChunkPlan* chunk = request.add_chunks();
    chunk->set_chunk(c);
    for (const std::string& o : Optimizers(c)) chunk->add_optimizers(o);
    if (HasDense(c)) {
      psync::v1::SyncGroup* dp = chunk->add_groups();
      dp->set_name(kDenseGroup);
      for (uint32_t r = 0; r < world_size; ++r) dp->add_ranks(r);
    }
    if (HasExpert(c)) {
      const uint32_t k = rank % expert_parallel;
      psync::v1::SyncGroup* edp = chunk->add_groups();
      edp->set_name(ExpertGroup(k));
      for (uint32_t r = k; r < world_size; r += expert_parallel) edp->add_ranks(r);
    }
  }
  return request;
}

uint64_t GroupChecksum(uint64_t step, uint32_t chunk, const std::string& group) {
  return Mix(Fnv(Fnv(Fnv(kFnvOffset, step), chunk), group));
}

uint64_t ShardChecksum(uint64_t step, uint32_t chunk, uint32_t rank, const std::string& optimizer) {
  return Mix(Fnv(Fnv(Fnv(Fnv(kFnvOffset, step), chunk), rank), optimizer));
}

}  // namespace psync::sim
