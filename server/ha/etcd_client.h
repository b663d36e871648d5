// EtcdClient: the few etcd v3 calls coordinator replicas need: leases (grant, keep alive, revoke),
// a create-if-absent transaction, reads by key or prefix, a write and a delete guarded by the key's
// create_revision, and a delete by prefix. Replicas keep only membership and job ownership in etcd
// (see ownership.h).
//
// Every call either does what it says or returns an error and changes nothing it did not say:
// UNAVAILABLE / DEADLINE_EXCEEDED when etcd could not be reached in time (the caller retries),
// NOT_FOUND for a lease that expired or never existed. Implementations are thread-safe.
#ifndef PSYNC_SERVER_HA_ETCD_CLIENT_H_
#define PSYNC_SERVER_HA_ETCD_CLIENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psync::server::ha {

// One key as etcd holds it.
struct KeyValue {
  std::string key;
  std::string value;
  // The store revision at which the key was created; unique per creation (a key deleted and
  // created again gets a higher one).
  int64_t create_revision = 0;
  // The lease the key is attached to (0: none).
  int64_t lease = 0;
};

class EtcdClient {
 public:
  virtual ~EtcdClient() = default;

  // A new lease of `ttl` (whole seconds, at least 1). Returns its id.
  virtual absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) = 0;
  // Renews `lease` to its full TTL. Returns the TTL it now has; NOT_FOUND when it expired.
  virtual absl::StatusOr<absl::Duration> KeepAlive(int64_t lease) = 0;
  // Revokes `lease`, deleting every key attached to it. OK when it had already expired.
  virtual absl::Status RevokeLease(int64_t lease) = 0;

  // Creates `key` = `value` attached to `lease` unless the key exists, in one transaction. Returns
  // the key as it is after the transaction: the new key, or the one that was already there (the
  // caller compares value and lease to tell). NOT_FOUND when `lease` has expired.
  virtual absl::StatusOr<KeyValue> CreateIfAbsent(const std::string& key, const std::string& value,
                                                  int64_t lease) = 0;
  // Writes `key` = `value` attached to `lease` (0: none), whether or not it exists.
  virtual absl::Status Put(const std::string& key, const std::string& value, int64_t lease) = 0;
  // The key, or nullopt when absent.
  virtual absl::StatusOr<std::optional<KeyValue>> Get(const std::string& key) = 0;
  // Every key starting with `prefix`, sorted by key.
  virtual absl::StatusOr<std::vector<KeyValue>> GetPrefix(const std::string& prefix) = 0;
  // Deletes `key` if its create_revision is `create_revision` (it is the same creation); returns
  // whether it deleted it.
  virtual absl::StatusOr<bool> DeleteIfCreatedAt(const std::string& key,
                                                 int64_t create_revision) = 0;
  // Writes `key` = `value` (no lease) if its create_revision is `create_revision` (it is the same
  // creation, not deleted since); returns whether it wrote.
  virtual absl::StatusOr<bool> PutIfCreatedAt(const std::string& key, const std::string& value,
                                              int64_t create_revision) = 0;
  // Deletes every key starting with `prefix`; returns how many it deleted.
  virtual absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) = 0;
};

}  // namespace psync::server::ha

#endif  // PSYNC_SERVER_HA_ETCD_CLIENT_H_
