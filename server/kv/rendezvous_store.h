// RendezvousStore: the coordinator's small key-value store scoped to (job, generation), which
// collectives use to exchange connection details (NCCL unique ids, Gloo endpoints).
//
// Get either answers at once or, with wait=true, parks the request until every key is set; a
// parked request completes through its callback from the thread that sets the last key, or with
// the status given to Cancel. Callbacks run after the store's lock is released. Keys of a job's
// older generations are dropped when a newer generation writes. Thread-safe.
#ifndef PSYNC_SERVER_KV_RENDEZVOUS_STORE_H_
#define PSYNC_SERVER_KV_RENDEZVOUS_STORE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace psync::server {

struct RendezvousLimits {
  size_t max_key_bytes = 256;
  size_t max_value_bytes = 65536;
  size_t max_keys_per_job = 65536;
  size_t max_keys_per_get = 64;
};

class RendezvousStore {
 public:
  using Values = std::vector<std::string>;
  using Callback = std::function<void(absl::StatusOr<Values>)>;
  // Answers OK when (job, generation) is current; NOT_FOUND / FAILED_PRECONDITION otherwise.
  // The caller is identified by the rank and session id its Join returned.
  struct Caller {
    uint32_t rank = 0;
    std::string session_id;
  };
  using GenerationCheck = std::function<absl::Status(const std::string& job, uint64_t generation,
                                                     const Caller& caller)>;

  RendezvousStore(RendezvousLimits limits, GenerationCheck check)
      : limits_(limits), check_(std::move(check)) {}

  absl::Status Set(const std::string& job, uint64_t generation, const Caller& caller,
                   const std::string& key, std::string value) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls `done` exactly once: now (values, or an error), or later when the keys are set or the
  // request is cancelled. Returns an id for Cancel (0 when `done` already ran).
  uint64_t Get(const std::string& job, uint64_t generation, const Caller& caller,
               const std::vector<std::string>& keys, bool wait, Callback done)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Completes the parked request `id` with `status`; no-op if it already completed.
  void Cancel(uint64_t id, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // The job left the coordinator: its keys are dropped and its parked requests complete with
  // `status`. Returns how many keys were dropped.
  size_t DropJob(const std::string& job, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Scope {
    uint64_t generation = 0;
    absl::flat_hash_map<std::string, std::string> values;
  };
  struct Waiter {
    std::string job;
    uint64_t generation = 0;
    std::vector<std::string> keys;
    Callback done;
  };

  absl::Status CheckKey(absl::string_view field, const std::string& key) const;
  // Values of `keys` if all are set in (job, generation).
  bool Lookup(const std::string& job, uint64_t generation, const std::vector<std::string>& keys,
              Values* out) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RendezvousLimits limits_;
  const GenerationCheck check_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Scope> jobs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_KV_RENDEZVOUS_STORE_H_
