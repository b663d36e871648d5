#include "worker/model_layout.h"

#include "absl/strings/str_cat.h"

namespace psync {
namespace worker {
namespace {

constexpr char kDenseGroup[] = "dp";

int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

absl::string_view ParamKindName(ParamKind kind) {
  return kind == ParamKind::kDense ? "dense" : "expert";
}

std::string ExpertGroupName(int ep_rank) { return absl::StrCat("edp", ep_rank); }

BufferLayout::BufferLayout(int64_t real_elements, int buckets, int group_size, ParamDtype dtype)
    : real_elements_(real_elements),
      buckets_(buckets),
      group_size_(group_size),
      dtype_(dtype),
      bucket_elements_(RoundUp((real_elements + buckets - 1) / buckets,
                               int64_t{kMxfp8BlockSize} * group_size)) {}

absl::Status ModelConfig::Validate() const {
  if (world_size < 1 || world_size > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size must be in [1, ", kMaxWorldSize, "] (got ", world_size, ")"));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank must be in [0, ", world_size, ") (got ", rank, ")"));
  }
  if (num_chunks < 1 || num_chunks > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunks must be in [1, 4096] (got ", num_chunks, ")"));
  }
  if (dense_elements < 1 || dense_elements > kMaxElements) {
    return absl::InvalidArgumentError(absl::StrCat("dense elements per chunk must be in [1, ",
                                                   kMaxElements, "] (got ", dense_elements, ")"));
  }
  if (expert_elements < 1 || expert_elements > kMaxElements) {
    return absl::InvalidArgumentError(absl::StrCat("expert elements per chunk must be in [1, ",
                                                   kMaxElements, "] (got ", expert_elements, ")"));
  }
  if (expert_parallel < 1 || world_size % expert_parallel != 0) {
    return absl::InvalidArgumentError(absl::StrCat("expert-parallel size must be >= 1 and divide ",
                                                   "the world size ", world_size, " (got ",
                                                   expert_parallel, ")"));
  }
  if (buckets < 1 || buckets > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("buckets must be in [1, 1024] (got ", buckets, ")"));
  }
  if (dtype != ParamDtype::kBf16 && dtype != ParamDtype::kMxfp8) {
    return absl::InvalidArgumentError("dtype must be bf16 or mxfp8");
  }
  return absl::OkStatus();
}

int ModelConfig::GroupSize(ParamKind kind) const {
  return kind == ParamKind::kDense ? world_size : world_size / expert_parallel;
}

int ModelConfig::GroupRank(ParamKind kind) const {
  return kind == ParamKind::kDense ? rank : rank / expert_parallel;
}

std::vector<int> ModelConfig::GroupMembers(ParamKind kind) const {
  std::vector<int> out;
  if (kind == ParamKind::kDense) {
    for (int r = 0; r < world_size; ++r) out.push_back(r);
  } else {
    for (int r = ep_rank(); r < world_size; r += expert_parallel) out.push_back(r);
  }
  return out;
}

std::string ModelConfig::GroupName(ParamKind kind) const {
  return kind == ParamKind::kDense ? kDenseGroup : ExpertGroupName(ep_rank());
}

int64_t ModelConfig::RealElements(ParamKind kind) const {
  return kind == ParamKind::kDense ? dense_elements : expert_elements;
}

BufferLayout ModelConfig::Layout(ParamKind kind) const {
  return BufferLayout(RealElements(kind), buckets, GroupSize(kind), dtype);
}

psync::v1::JoinRequest ModelConfig::JoinRequestFor(const std::string& job_id) const {
  psync::v1::JoinRequest request;
  request.set_job_id(job_id);
  request.set_world_size(world_size);
  request.set_rank(rank);
  request.set_num_chunks(num_chunks);
  request.set_first_step(0);
  for (int c = 0; c < num_chunks; ++c) {
    psync::v1::ChunkPlan* chunk = request.add_chunks();
    chunk->set_chunk(c);
    for (ParamKind kind : kParamKinds) {
      chunk->add_optimizers(std::string(ParamKindName(kind)));
      psync::v1::SyncGroup* group = chunk->add_groups();
      group->set_name(GroupName(kind));
      for (int r : GroupMembers(kind)) group->add_ranks(r);
    }
  }
  return request;
}

}  // namespace worker
}  // namespace psync
