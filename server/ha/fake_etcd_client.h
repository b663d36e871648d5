// FakeEtcd: an in-memory EtcdClient with etcd's semantics for what replicas use (revisions,
// leases that expire on a Clock, keys deleted with their lease), for tests of ownership without
// a network. SetReachable(false) makes every call UNAVAILABLE (a partition from etcd).
// Thread-safe. Does not own the clock.
#ifndef PSYNC_SERVER_HA_FAKE_ETCD_CLIENT_H_
#define PSYNC_SERVER_HA_FAKE_ETCD_CLIENT_H_

#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "serve/clock.h"
#include "server/ha/etcd_client.h"

namespace psync::server::ha {

class FakeEtcd final : public EtcdClient {
 public:
  explicit FakeEtcd(serve::Clock* clock) : clock_(clock) {}

  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<absl::Duration> KeepAlive(int64_t lease) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RevokeLease(int64_t lease) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<KeyValue> CreateIfAbsent(const std::string& key, const std::string& value,
                                          int64_t lease) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Put(const std::string& key, const std::string& value, int64_t lease) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<KeyValue>> Get(const std::string& key) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<KeyValue>> GetPrefix(const std::string& prefix) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<bool> DeleteIfCreatedAt(const std::string& key, int64_t create_revision) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<bool> PutIfCreatedAt(const std::string& key, const std::string& value,
                                      int64_t create_revision) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override ABSL_LOCKS_EXCLUDED(mu_);

  // While false, every call is UNAVAILABLE and changes nothing (leases still expire).
  void SetReachable(bool reachable) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls answered so far (reachable or not).
  int calls() const ABSL_LOCKS_EXCLUDED(mu_);
  // While held, CreateIfAbsent (a claim) waits before doing anything, until released: a slow
  // etcd for the claims only.
  void HoldClaims(bool hold) ABSL_LOCKS_EXCLUDED(hold_mu_);
  // Claims waiting in the hold now.
  int claims_held() const ABSL_LOCKS_EXCLUDED(hold_mu_);

 private:
  // Expires leases past their deadline, deleting their keys; UNAVAILABLE when unreachable.
  absl::Status Enter() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  serve::Clock* const clock_;
  mutable absl::Mutex hold_mu_;
  bool hold_ ABSL_GUARDED_BY(hold_mu_) = false;
  int held_ ABSL_GUARDED_BY(hold_mu_) = 0;
  mutable absl::Mutex mu_;
  bool reachable_ ABSL_GUARDED_BY(mu_) = true;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_lease_ ABSL_GUARDED_BY(mu_) = 100;
  struct Lease {
    absl::Duration ttl;
    absl::Time expires;
  };
  absl::flat_hash_map<int64_t, Lease> leases_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, KeyValue> keys_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psync::server::ha

#endif  // PSYNC_SERVER_HA_FAKE_ETCD_CLIENT_H_
