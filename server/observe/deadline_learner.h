// DeadlineLearner: learns, per chunk, how long a chunk normally waits between its first check-in
// and its release, and derives the deadline after which a waiting chunk is a stall:
//
//   deadline = clamp(multiplier * percentile(last `window` waits), floor, ceiling)
//
// Before `min_samples` waits were observed the deadline is `initial`. Pure; thread-compatible.
#ifndef PSYNC_SERVER_OBSERVE_DEADLINE_LEARNER_H_
#define PSYNC_SERVER_OBSERVE_DEADLINE_LEARNER_H_

#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "server/core/types.h"

namespace psync::observe {

struct DeadlineOptions {
  size_t window = 64;
  double percentile = 0.99;
  double multiplier = 3.0;
  absl::Duration floor = absl::Milliseconds(100);
  absl::Duration ceiling = absl::Seconds(30);
  absl::Duration initial = absl::Seconds(1);
  size_t min_samples = 8;
};

class DeadlineLearner {
 public:
  explicit DeadlineLearner(DeadlineOptions options = {}) : options_(options) {}

  void Observe(core::ChunkId chunk, absl::Duration wait);
  absl::Duration Deadline(core::ChunkId chunk) const;
  const DeadlineOptions& options() const { return options_; }

 private:
  DeadlineOptions options_;
  absl::flat_hash_map<core::ChunkId, std::deque<absl::Duration>> waits_;
};

}  // namespace psync::observe

#endif  // PSYNC_SERVER_OBSERVE_DEADLINE_LEARNER_H_
