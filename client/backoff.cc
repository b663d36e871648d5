#include "client/backoff.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"

namespace psync {

absl::Status ValidateBackoffOptions(const BackoffOptions& options) {
  if (options.initial <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("backoff.initial must be > 0 (got ",
                                                   absl::FormatDuration(options.initial), ")"));
  }
  if (options.max < options.initial) {
    return absl::InvalidArgumentError(absl::StrCat("backoff.max must be >= backoff.initial (got ",
                                                   absl::FormatDuration(options.max), " < ",
                                                   absl::FormatDuration(options.initial), ")"));
  }
  if (!(options.multiplier >= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("backoff.multiplier must be >= 1 (got ", options.multiplier, ")"));
  }
  if (!(options.jitter >= 0.0 && options.jitter < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("backoff.jitter must be in [0, 1) (got ", options.jitter, ")"));
  }
  return absl::OkStatus();
}

Backoff::Backoff(BackoffOptions options, std::function<double()> uniform01)
    : options_(std::move(options)), uniform01_(std::move(uniform01)) {
  if (!uniform01_) {
    auto gen = std::make_shared<absl::BitGen>();
    uniform01_ = [gen] { return absl::Uniform<double>(*gen, 0.0, 1.0); };
  }
}

absl::Duration Backoff::NextDelay() {
  // Grow step by step and stop at the cap, so the exponent never overflows.
  absl::Duration nominal = options_.initial;
  for (int i = 0; i < attempt_ && nominal < options_.max; ++i) nominal *= options_.multiplier;
  nominal = std::min(nominal, options_.max);
  ++attempt_;
  const double u = 2.0 * uniform01_() - 1.0;  // [-1, 1)
  return nominal * (1.0 + options_.jitter * u);
}

}  // namespace psync
