// CoordinatorKvStore: the collectives' rendezvous store, backed by the coordinator's KvSet/KvGet.
//
// What: a KeyValueStore (worker/collective/kv_store.h) whose keys live on the psync coordinator,
// scoped to one (job, generation). Ranks in different processes and on different machines see the
// same keys, so Gloo publishes its endpoints and NCCL its unique id through it. Keys of an older
// generation are dropped by the coordinator, so a restarted job never reads a stale address.
//
// Calls: Set() is one KvSet; Get() one KvGet without waiting; Wait() one KvGet with wait=true per
// 64 keys (the coordinator's limit per call), each bounded by a call deadline at the end of
// `timeout`. Every call carries its own deadline: Set() and Get() use `call_timeout`.
//
// Errors: the coordinator's status codes, unchanged (NOT_FOUND for a missing key in Get() or an
// unknown job, FAILED_PRECONDITION for a stale generation, INVALID_ARGUMENT for an empty or
// oversized key or value, UNAVAILABLE when the coordinator cannot be reached). Wait() returns
// DEADLINE_EXCEEDED naming the keys it waited for when `timeout` passes first.
//
// Thread-safety: all methods may be called from any number of threads at once (gRPC stubs are
// thread-safe). Ownership: the store shares the channel it is given.
#ifndef PSYNC_WORKER_COORDINATOR_KV_STORE_H_
#define PSYNC_WORKER_COORDINATOR_KV_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "worker/collective/kv_store.h"

namespace psync {
namespace worker {

class CoordinatorKvStore final : public KeyValueStore {
 public:
  // The coordinator's limit on keys per KvGet.
  static constexpr size_t kMaxKeysPerGet = 64;

  CoordinatorKvStore(std::shared_ptr<grpc::Channel> channel, std::string job_id,
                     uint64_t generation, absl::Duration call_timeout = absl::Seconds(30));
  CoordinatorKvStore(const CoordinatorKvStore&) = delete;
  CoordinatorKvStore& operator=(const CoordinatorKvStore&) = delete;

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key) override;
  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override;

  const std::string& job_id() const { return job_id_; }
  uint64_t generation() const { return generation_; }

 private:
  // A KvGet of `keys` in this store's (job, generation).
  psync::v1::KvGetRequest MakeKvGet(absl::Span<const std::string> keys, bool wait) const;

  // Constant after construction.
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<psync::v1::Coordinator::Stub> stub_;
  const std::string job_id_;
  const uint64_t generation_;
  const absl::Duration call_timeout_;
};

// grpc::Status -> absl::Status with the same code and message, prefixed by `what`.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view what);

// Runs one unary call, `call`, on a fresh ClientContext whose deadline is `timeout` from now, and
// returns its status through FromGrpcStatus(status, what).
absl::Status CallWithTimeout(absl::Duration timeout, absl::string_view what,
                             absl::FunctionRef<grpc::Status(grpc::ClientContext*)> call);

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COORDINATOR_KV_STORE_H_
