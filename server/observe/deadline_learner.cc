#include "server/observe/deadline_learner.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace psync::observe {

void DeadlineLearner::Observe(core::ChunkId chunk, absl::Duration wait) {
  std::deque<absl::Duration>& waits = waits_[chunk];
  waits.push_back(wait);
  while (waits.size() > options_.window) waits.pop_front();
}

absl::Duration DeadlineLearner::Deadline(core::ChunkId chunk) const {
  auto it = waits_.find(chunk);
  if (it == waits_.end() || it->second.size() < options_.min_samples) return options_.initial;
  std::vector<absl::Duration> sorted(it->second.begin(), it->second.end());
  std::sort(sorted.begin(), sorted.end());
  // Nearest-rank percentile.
  const size_t rank = static_cast<size_t>(std::ceil(options_.percentile * sorted.size()));
  const absl::Duration p = sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
  return std::clamp(p * options_.multiplier, options_.floor, options_.ceiling);
}

}  // namespace psync::observe
