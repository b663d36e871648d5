// Backoff: the delay schedule between reconnect attempts of a psync::Client.
//
// Attempt k (0-based, counted since the last Reset()) waits
//     min(max, initial * multiplier^k) * (1 + jitter * u),   u uniform in [-1, 1),
// so with the defaults (initial 50 ms, max 2 s, multiplier 2, jitter 0.2) the nominal schedule is
// 50, 100, 200, 400, 800, 1600, 2000, 2000, ... ms, each spread by +-20% so that many ranks that
// lost the coordinator at the same moment do not reconnect in lockstep. The jitter is applied after
// the cap: a delay is never longer than max * (1 + jitter).
//
// The random source is injected (a function returning values uniform in [0, 1)), so tests check
// the exact schedule. Thread-compatible: one Backoff per reconnect loop.
#ifndef PSYNC_CLIENT_BACKOFF_H_
#define PSYNC_CLIENT_BACKOFF_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace psync {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(50);
  absl::Duration max = absl::Seconds(2);
  double multiplier = 2.0;
  // Relative spread in [0, 1): each delay is scaled by a factor uniform in [1 - jitter, 1 +
  // jitter).
  double jitter = 0.2;
};

// OK, or INVALID_ARGUMENT naming the field: initial > 0, max >= initial, multiplier >= 1,
// jitter in [0, 1).
absl::Status ValidateBackoffOptions(const BackoffOptions& options);

class Backoff {
 public:
  // `uniform01` returns values uniform in [0, 1); the default draws from a seeded absl::BitGen.
  // Requires ValidateBackoffOptions(options).ok().
  explicit Backoff(BackoffOptions options, std::function<double()> uniform01 = nullptr);

  // The delay before the next attempt; advances the schedule.
  absl::Duration NextDelay();

  // Starts the schedule again from `initial` (after a successful connection).
  void Reset() { attempt_ = 0; }

  int attempt() const { return attempt_; }

 private:
  const BackoffOptions options_;
  std::function<double()> uniform01_;
  int attempt_ = 0;
};

}  // namespace psync

#endif  // PSYNC_CLIENT_BACKOFF_H_
