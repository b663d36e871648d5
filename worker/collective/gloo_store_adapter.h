// GlooStoreAdapter: presents a KeyValueStore to Gloo as a
// gloo::rendezvous::Store, with every key put under one prefix.
//
// What: Gloo's connectFullMesh() publishes each rank's transport addresses
// with set() and reads its peers' with wait() + get(). The adapter forwards
// those calls to the KeyValueStore with `prefix` in front of each key, so
// several groups (each with its own prefix) rendezvous on one store.
//
// Ownership: the adapter borrows `store`, which must outlive it.
// Thread-safety: as safe as the KeyValueStore (Gloo calls it from one thread).
// Errors: Gloo's Store interface has no status, so every failure is thrown as
// GlooStatusError carrying the store's status: wait() past its timeout throws
// DEADLINE_EXCEEDED; get() first waits up to the default timeout for the key.
#ifndef PSYNC_WORKER_COLLECTIVE_GLOO_STORE_ADAPTER_H_
#define PSYNC_WORKER_COLLECTIVE_GLOO_STORE_ADAPTER_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"
#include "worker/collective/kv_store.h"

namespace psync {
namespace worker {

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  // `default_timeout` bounds get() and the wait() overload without timeout.
  GlooStoreAdapter(KeyValueStore* store, std::string prefix, absl::Duration default_timeout);
  GlooStoreAdapter(const GlooStoreAdapter&) = delete;
  GlooStoreAdapter& operator=(const GlooStoreAdapter&) = delete;

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::vector<std::string> Prefixed(const std::vector<std::string>& keys) const;

  // Constant after construction.
  KeyValueStore* const store_;
  const std::string prefix_;
  const absl::Duration default_timeout_;
};

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COLLECTIVE_GLOO_STORE_ADAPTER_H_
