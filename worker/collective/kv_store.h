// KeyValueStore: the rendezvous store the ranks of one job use to find each
// other before a collective group is formed.
//
// What: a flat map from string keys to byte-string values. Ranks publish what
// their peers need (transport addresses, a NCCL unique id) with Set(), and
// block in Wait() until every key they need is present. Values are opaque
// bytes (they may contain '\0'). A key is written once per rendezvous by
// convention; a second Set() replaces the value.
//
// Scope: one store is shared by every group of one job generation; each
// collective backend prefixes its keys with its own name and the group name,
// so several groups rendezvous on one store without clashing. The production
// store is offered by the coordinator over gRPC, scoped to (job, generation);
// tests use InMemoryKeyValueStore.
//
// Thread-safety: implementations are safe for concurrent use by any number of
// threads.
//
// Errors: Get() of a missing key returns NOT_FOUND and never blocks. Wait()
// returns DEADLINE_EXCEEDED when its timeout passes first. A store that
// cannot reach its backend returns UNAVAILABLE.
#ifndef PSYNC_WORKER_COLLECTIVE_KV_STORE_H_
#define PSYNC_WORKER_COLLECTIVE_KV_STORE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace psync {
namespace worker {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;

  // Stores `value` under `key`, replacing any earlier value, and wakes every
  // Wait() whose keys are now all present. On error nothing is stored.
  virtual absl::Status Set(absl::string_view key, absl::string_view value) = 0;

  // Returns the value stored under `key`, or NOT_FOUND if there is none.
  // Never waits for the key to appear: call Wait() first.
  virtual absl::StatusOr<std::string> Get(absl::string_view key) = 0;

  // Blocks until every key in `keys` has a value (OK) or `timeout` has passed
  // (DEADLINE_EXCEEDED, naming the keys still missing). An empty `keys`
  // returns OK at once; absl::InfiniteDuration() waits without limit.
  virtual absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) = 0;
};

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COLLECTIVE_KV_STORE_H_
