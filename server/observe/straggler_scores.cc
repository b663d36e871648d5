#include "server/observe/straggler_scores.h"

#include <algorithm>

namespace psync::observe {

void StragglerScores::OnRelease(const std::vector<std::pair<core::RankId, absl::Time>>& checkins) {
  if (checkins.empty()) return;
  absl::Time first = absl::InfiniteFuture();
  absl::Time last = absl::InfinitePast();
  absl::flat_hash_map<core::RankId, absl::Time> latest;
  for (const auto& [rank, time] : checkins) {
    first = std::min(first, time);
    last = std::max(last, time);
    auto [it, inserted] = latest.emplace(rank, time);
    if (!inserted) it->second = std::max(it->second, time);
  }
  for (const auto& [rank, time] : latest) {
    const double lateness = absl::ToDoubleSeconds(time - first);
    StragglerScore& s = scores_[rank];
    s.rank = rank;
    s.score_seconds = s.samples == 0 ? lateness : alpha_ * lateness + (1 - alpha_) * s.score_seconds;
    s.last_seconds = lateness;
    ++s.samples;
    if (time == last && last > first) ++s.times_last;  // a tie at the first instant is nobody's fault
  }
}

std::vector<StragglerScore> StragglerScores::Top(size_t k) const {
  std::vector<StragglerScore> all;
  all.reserve(scores_.size());
  for (const auto& [rank, s] : scores_) all.push_back(s);
  std::sort(all.begin(), all.end(), [](const StragglerScore& a, const StragglerScore& b) {
    if (a.score_seconds != b.score_seconds) return a.score_seconds > b.score_seconds;
    return a.rank < b.rank;
  });
  if (all.size() > k) all.resize(k);
  return all;
}

}  // namespace psync::observe
