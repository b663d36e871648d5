// MergedMirror: for the property test, a second JobTracker fed the same inputs as the one under
// test, in batches that share one Decisions with merge_rank_events set and one time, as a node's
// batch is applied (Coordinator::ApplyBatch). Each batch must decide exactly what its calls
// decided one at a time: the same statuses and deliveries in the same order, the same other
// events in the same order, and, between any two of them, the same check-ins and SyncDones once
// its merged records are expanded to one per rank (times and durations aside: the batch has one
// time). Test-only; not thread-safe; owns its tracker.
#ifndef PSYNC_SERVER_CORE_MERGED_MIRROR_H_
#define PSYNC_SERVER_CORE_MERGED_MIRROR_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/core/job_tracker.h"

namespace psync::core::testing {

class MergedMirror {
 public:
  MergedMirror(uint32_t seed, TrackerOptions options) : rng_(seed), tracker_("job", options) {}

  // A check-in, skip or SyncDone: `call` makes it on the mirror's tracker, with the batch's time
  // and Decisions; `status` and `out` are what the tracker under test answered one at a time.
  using Call = std::function<absl::Status(JobTracker&, absl::Time, Decisions*)>;
  absl::Status Batched(const Call& call, const absl::Status& status, const Decisions& out,
                       absl::Time now);
  // A join: never part of a batch (the batch so far is checked first).
  absl::Status Alone(const Call& call, const absl::Status& status, const Decisions& out,
                     absl::Time now);
  // Checks the batch so far and starts a new one.
  absl::Status Flush();

  uint64_t merged_records() const { return merged_records_; }

 private:
  std::mt19937 rng_;
  JobTracker tracker_;
  Decisions batch_;  // the mirror's, merged
  absl::Time batch_time_;
  size_t batch_left_ = 0;
  std::vector<Delivery> one_by_one_deliveries_;
  std::vector<Event> one_by_one_events_;
  uint64_t merged_records_ = 0;  // records that stood for more than one rank
};

}  // namespace psync::core::testing

#endif  // PSYNC_SERVER_CORE_MERGED_MIRROR_H_
