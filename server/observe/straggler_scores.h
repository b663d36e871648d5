// StragglerScores: a rolling per-rank lateness score. At every release of a (step, chunk), each
// contributor's lateness is the time from the chunk's first check-in to its own check-in; a rank's
// score is an exponentially weighted moving average of its lateness (in seconds) over the chunks
// it contributes to. The slowest ranks have the highest scores. Pure; thread-compatible.
//
// Scores are kept in a vector indexed by rank (ranks are below the job's world size), so that a
// release of N contributors visits each rank's entry once per check-in and allocates nothing: it
// runs on the coordinator's release path. Memory: 64 bytes per rank up to the highest rank scored
// (a release needs the job's plan complete, so every rank below the world size has joined by then).
#ifndef PSYNC_SERVER_OBSERVE_STRAGGLER_SCORES_H_
#define PSYNC_SERVER_OBSERVE_STRAGGLER_SCORES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "server/core/types.h"

namespace psync::observe {

struct StragglerScore {
  core::RankId rank = 0;
  double score_seconds = 0;  // EWMA of lateness
  double last_seconds = 0;   // lateness at the latest release
  uint64_t samples = 0;
  uint64_t times_last = 0;  // releases this rank completed (it was the last contributor)
};

class StragglerScores {
 public:
  // `alpha`: weight of the newest sample in the moving average.
  explicit StragglerScores(double alpha = 0.1) : alpha_(alpha) {}

  // A contributor's check-in: its rank and when it arrived, in Unix nanoseconds (converted once
  // for the ranks of one record, who share their time).
  using Checkin = std::pair<core::RankId, int64_t>;

  // One released (step, chunk): every contributor's check-in (a rank with two optimizers appears
  // twice; its later check-in counts).
  void OnRelease(const std::vector<Checkin>& checkins);

  // The k highest scores, highest first (ties by rank).
  std::vector<StragglerScore> Top(size_t k) const;
  std::vector<StragglerScore> All() const { return Top(scores_.size()); }
  // Every scored rank, by rank (no sorting: for a view of all of them).
  std::vector<StragglerScore> ByRank() const;

 private:
  struct Entry {
    StragglerScore score;  // samples == 0: the rank has not contributed yet
    // The latest release that scored the rank (release_ while it is being scored), the rank's
    // latest check-in in it (Unix nanoseconds) and its score before it: a rank with two
    // optimizers appears twice in one release, and its later check-in takes the sample.
    uint64_t release = 0;
    int64_t latest_ns = 0;
    double before = 0;
  };

  double alpha_;
  uint64_t release_ = 0;       // releases scored so far
  std::vector<Entry> scores_;  // indexed by rank
};

}  // namespace psync::observe

#endif  // PSYNC_SERVER_OBSERVE_STRAGGLER_SCORES_H_
