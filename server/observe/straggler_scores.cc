#include "server/observe/straggler_scores.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace psync::observe {

void StragglerScores::OnRelease(const std::vector<Checkin>& checkins) {
  if (checkins.empty()) return;
  const uint64_t release = ++release_;
  // The release's first and last check-in, and room for its highest rank: one pass in order.
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = std::numeric_limits<int64_t>::min();
  core::RankId highest = 0;
  for (const auto& [rank, at] : checkins) {
    first = std::min(first, at);
    last = std::max(last, at);
    highest = std::max(highest, rank);
  }
  if (highest >= scores_.size()) scores_.resize(static_cast<size_t>(highest) + 1);
  // One sample per rank, from its latest check-in here: its first appearance takes the sample,
  // a later one of a later check-in takes it again from the score kept before this release (so
  // the result is the one the latest check-in alone gives). One visit of each entry per
  // appearance, in the check-ins' order.
  for (const auto& [rank, at] : checkins) {
    Entry& e = scores_[rank];
    StragglerScore& s = e.score;
    if (e.release != release) {
      e.release = release;
      e.before = s.score_seconds;
      ++s.samples;
    } else if (at <= e.latest_ns) {
      continue;
    }
    e.latest_ns = at;
    const double lateness = static_cast<double>(at - first) / 1e9;
    s.rank = rank;
    s.score_seconds = s.samples == 1 ? lateness : alpha_ * lateness + (1 - alpha_) * e.before;
    s.last_seconds = lateness;
    // The rank's latest check-in reached the release's last (never again: it is the latest). A
    // tie at the first instant is nobody's fault.
    if (at == last && last > first) ++s.times_last;
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
