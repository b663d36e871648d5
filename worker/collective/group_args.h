// Checks of the arguments every CollectiveFactory::Create() receives and every
// Collective operation receives, so that every backend rejects the same inputs
// with the same words; and the store key prefix that keeps one group's
// rendezvous keys apart from another's.
//
// Thread-safety: pure functions.
// Errors: the checks return INVALID_ARGUMENT naming the first bad field and
// its allowed range; they never touch the store or the buffers.
#ifndef PSYNC_WORKER_COLLECTIVE_GROUP_ARGS_H_
#define PSYNC_WORKER_COLLECTIVE_GROUP_ARGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "worker/collective/kv_store.h"

namespace psync {
namespace worker {

// Longest group name accepted, in bytes.
inline constexpr size_t kMaxGroupNameLength = 128;

// OK when `group` is 1..kMaxGroupNameLength characters from [A-Za-z0-9_.:-],
// 0 <= rank < size, `store` is not null and 1 ms <= timeout < infinity.
absl::Status ValidateGroupArgs(absl::string_view group, int rank, int size,
                               const KeyValueStore* store, absl::Duration timeout);

// Collective::AllGather on a group of `size` ranks, bytes_per_rank > 0: send
// and recv are not null and size * bytes_per_rank does not overflow.
absl::Status CheckAllGatherArgs(const void* send, const void* recv, size_t bytes_per_rank,
                                int size);

// Collective::ReduceScatterSum on a group of `size` ranks, count_per_rank > 0:
// send and recv are not null and the bytes of size * count_per_rank floats do
// not overflow.
absl::Status CheckReduceScatterArgs(const float* send, const float* recv, size_t count_per_rank,
                                    int size);

// The prefix of every store key `backend` writes for `group`:
// "collective/<backend>/<group>/". Distinct (backend, group) pairs with valid
// names give prefixes of which none is a prefix of another.
std::string GroupKeyPrefix(absl::string_view backend, absl::string_view group);

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COLLECTIVE_GROUP_ARGS_H_
