#include "server/observe/straggler_scores.h"

#include <algorithm>

namespace psync::observe {

void StragglerScores::OnRelease(const std::vector<std::pair<core::RankId, absl::Time>>& checkins) {
  if (checkins.empty()) return;
  const uint64_t release = ++release_;
  absl::Time first = absl::InfiniteFuture();
  absl::Time last = absl::InfinitePast();
  // Pass 1: each rank's latest check-in in this release.
  for (const auto& [rank, time] : checkins) {
    first = std::min(first, time);
    last = std::max(last, time);
    if (rank >= scores_.size()) scores_.resize(static_cast<size_t>(rank) + 1);
    Entry& e = scores_[rank];
    if (e.release != release) {
      e.release = release;
      e.latest = time;
    } else {
      e.latest = std::max(e.latest, time);
    }
  }
  // Pass 2: one sample per rank (its first appearance here; `release` is then cleared).
  for (const auto& [rank, time] : checkins) {
    Entry& e = scores_[rank];
    if (e.release != release) continue;
    e.release = 0;
    const double lateness = absl::ToDoubleSeconds(e.latest - first);
    StragglerScore& s = e.score;
    s.rank = rank;
    s.score_seconds =
        s.samples == 0 ? lateness : alpha_ * lateness + (1 - alpha_) * s.score_seconds;
    s.last_seconds = lateness;
    ++s.samples;
    if (e.latest == last && last > first)
      ++s.times_last;  // a tie at the first instant is nobody's fault
  }
}

std::vector<StragglerScore> StragglerScores::ByRank() const {
  std::vector<StragglerScore> all;
  all.reserve(scores_.size());
  for (const Entry& e : scores_) {
    if (e.score.samples > 0) all.push_back(e.score);
  }
  return all;
}

std::vector<StragglerScore> StragglerScores::Top(size_t k) const {
  std::vector<StragglerScore> all;
  all.reserve(scores_.size());
  for (const Entry& e : scores_) {
    if (e.score.samples > 0) all.push_back(e.score);
  }
  const auto higher = [](const StragglerScore& a, const StragglerScore& b) {
    if (a.score_seconds != b.score_seconds) return a.score_seconds > b.score_seconds;
    return a.rank < b.rank;
  };
  if (all.size() > k) {
    std::partial_sort(all.begin(), all.begin() + k, all.end(), higher);
    all.resize(k);
  } else {
    std::sort(all.begin(), all.end(), higher);
  }
  return all;
}

}  // namespace psync::observe
