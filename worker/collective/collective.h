// Collective: the communication one rank does with the other ranks of one
// sync group, and CollectiveFactory, which forms such groups.
//
// What: a Collective is this rank's handle on one group of `size()` ranks (the
// dense data-parallel group of all W ranks, or an expert data-parallel group
// of W/E ranks). It all-gathers a model chunk's param buffer and
// reduce-scatters fp32 gradients over that group. Every rank of the group must
// issue the same operations, in the same order, with the same sizes; a rank
// that issues a different sequence makes its peers fail with a timeout.
//
// Buffers: the Gloo backend takes host pointers; the NCCL backend takes CUDA
// device pointers on the device that was current when the group was created.
// The caller owns every buffer and keeps it alive until the call returns. The
// send and recv buffers must not overlap. Calls are synchronous: when one
// returns OK, `recv` holds the result and `send` may be reused. The one
// exception is an NCCL group created with NcclOptions::enqueue_only
// (nccl_collective.h): its calls return once the operation is enqueued on the
// caller's stream, and Synchronize() waits for them.
//
// Thread-safety: a Collective is used by one thread at a time (calls are
// ordered operations on the group, so concurrent calls on one Collective
// would make the ranks disagree about the order). Different Collectives may
// be used from different threads at once. Factories are thread-safe.
//
// Errors: every call returns absl::Status and never hangs forever. A peer that
// is gone or never arrives makes the call fail within the group's timeout with
// DEADLINE_EXCEEDED (the peer did not answer in time) or UNAVAILABLE (its
// connection broke). Bad arguments are INVALID_ARGUMENT and leave the group
// usable. After a failed collective operation the group's state is unknown:
// that call and every later one fail (later ones with FAILED_PRECONDITION
// quoting the first error), and `recv` holds unspecified bytes. Recover by
// destroying the Collective and creating the group again under a new group
// name (keys in the store are written once per group name).
#ifndef PSYNC_WORKER_COLLECTIVE_COLLECTIVE_H_
#define PSYNC_WORKER_COLLECTIVE_COLLECTIVE_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "worker/collective/kv_store.h"

namespace psync {
namespace worker {

class Collective {
 public:
  virtual ~Collective() = default;

  // This rank's index in the group, in [0, size()).
  virtual int rank() const = 0;

  // Number of ranks in the group.
  virtual int size() const = 0;

  // Gathers `bytes_per_rank` bytes from every rank's `send` into `recv`, in
  // rank order: rank i's bytes land at recv + i * bytes_per_rank. `recv` holds
  // size() * bytes_per_rank bytes. The bytes are copied as they are (bf16,
  // fp8 or any other encoding). bytes_per_rank == 0 is a no-op. Bad arguments
  // (CheckAllGatherArgs in group_args.h) are refused here, for every backend.
  absl::Status AllGather(const void* send, void* recv, size_t bytes_per_rank);

  // Sums `send` element-wise over all ranks in fp32 and leaves this rank's
  // slice of the sum in `recv`: recv[j] = sum over ranks r of
  // send_r[rank() * count_per_rank + j]. `send` holds size() * count_per_rank
  // floats and is not modified; `recv` holds count_per_rank floats.
  // count_per_rank == 0 is a no-op. Bad arguments (CheckReduceScatterArgs in
  // group_args.h) are refused here, for every backend.
  absl::Status ReduceScatterSum(const float* send, float* recv, size_t count_per_rank);

  // Waits until every operation issued so far has finished. OK when all
  // succeeded; otherwise the group's first error, reported as itself the
  // first time the caller sees it (here or from an operation) and as
  // FAILED_PRECONDITION afterwards. Never hangs: bounded by the group's
  // timeout. Synchronous backends have nothing in flight: OK, or
  // FAILED_PRECONDITION once the group has failed.
  virtual absl::Status Synchronize() = 0;

 private:
  // The backend's operations, called only with a nonzero size and arguments
  // that passed the checks.
  virtual absl::Status DoAllGather(const void* send, void* recv, size_t bytes_per_rank) = 0;
  virtual absl::Status DoReduceScatterSum(const float* send, float* recv,
                                          size_t count_per_rank) = 0;
};

class CollectiveFactory {
 public:
  virtual ~CollectiveFactory() = default;

  // The backend's name: "gloo" or "nccl".
  virtual absl::string_view backend() const = 0;

  // Joins group `group` as rank `rank` of `size` ranks and returns this
  // rank's Collective once all `size` ranks have joined. Every rank of the
  // group calls Create() with the same `group`, `size` and backend, at about
  // the same time; each blocks until all have arrived.
  //
  // `group` names the group within `store` (letters, digits, '_', '-', '.',
  // ':'); it is used once per store: to form the group again, use a new name
  // (e.g. with an attempt number). `store` is borrowed: it is used only during
  // this call and must outlive it. `timeout` bounds the rendezvous and, after
  // it, each collective operation of the returned group.
  //
  // Errors: INVALID_ARGUMENT for a bad name, rank, size, timeout or a null
  // store; DEADLINE_EXCEEDED when some rank did not join within `timeout`;
  // UNAVAILABLE when a peer or the store could not be reached;
  // FAILED_PRECONDITION when the backend cannot run on this machine (NCCL
  // without a CUDA device); INTERNAL for a failure inside the backend. The
  // arguments are checked here (ValidateGroupArgs in group_args.h), for every
  // backend.
  absl::StatusOr<std::unique_ptr<Collective>> Create(absl::string_view group, int rank, int size,
                                                     KeyValueStore* store, absl::Duration timeout);

 private:
  // The backend's Create, called only with arguments that passed the checks.
  virtual absl::StatusOr<std::unique_ptr<Collective>> DoCreate(absl::string_view group, int rank,
                                                               int size, KeyValueStore* store,
                                                               absl::Duration timeout) = 0;
};

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COLLECTIVE_COLLECTIVE_H_
