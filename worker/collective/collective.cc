#include "worker/collective/collective.h"

#include "worker/collective/group_args.h"

namespace psync {
namespace worker {

absl::Status Collective::AllGather(const void* send, void* recv, size_t bytes_per_rank) {
  if (bytes_per_rank == 0) return absl::OkStatus();
  if (absl::Status s = CheckAllGatherArgs(send, recv, bytes_per_rank, size()); !s.ok()) {
    return s;
  }
  return DoAllGather(send, recv, bytes_per_rank);
}

absl::Status Collective::ReduceScatterSum(const float* send, float* recv, size_t count_per_rank) {
  if (count_per_rank == 0) return absl::OkStatus();
  if (absl::Status s = CheckReduceScatterArgs(send, recv, count_per_rank, size()); !s.ok()) {
    return s;
  }
  return DoReduceScatterSum(send, recv, count_per_rank);
}

absl::StatusOr<std::unique_ptr<Collective>> CollectiveFactory::Create(absl::string_view group,
                                                                      int rank, int size,
                                                                      KeyValueStore* store,
                                                                      absl::Duration timeout) {
  absl::Status valid = ValidateGroupArgs(group, rank, size, store, timeout);
  if (!valid.ok()) return valid;
  return DoCreate(group, rank, size, store, timeout);
}

}  // namespace worker
}  // namespace psync
