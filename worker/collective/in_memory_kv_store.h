// InMemoryKeyValueStore: a KeyValueStore held in this process's memory.
//
// What: the rendezvous store for tests that run many ranks as threads of one
// process, and for single-process tools. It has no persistence and no network
// side: ranks in other processes cannot see it.
//
// Thread-safety: every method may be called from any number of threads at
// once. Wait() blocks only the calling thread and is woken by Set(), never by
// polling.
//
// Errors: Get() of a missing key returns NOT_FOUND; Wait() returns
// DEADLINE_EXCEEDED, naming the missing keys, when its timeout passes. Set()
// always succeeds.
#ifndef PSYNC_WORKER_COLLECTIVE_IN_MEMORY_KV_STORE_H_
#define PSYNC_WORKER_COLLECTIVE_IN_MEMORY_KV_STORE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker/collective/kv_store.h"

namespace psync {
namespace worker {

class InMemoryKeyValueStore final : public KeyValueStore {
 public:
  InMemoryKeyValueStore() = default;
  InMemoryKeyValueStore(const InMemoryKeyValueStore&) = delete;
  InMemoryKeyValueStore& operator=(const InMemoryKeyValueStore&) = delete;

  absl::Status Set(absl::string_view key, absl::string_view value) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::string> Get(absl::string_view key) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // Number of keys stored; for tests and status pages.
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool AllPresent(absl::Span<const std::string> keys) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COLLECTIVE_IN_MEMORY_KV_STORE_H_
