// DrawFaults; contract: faults.h.
#include "tests/simulation/faults.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace psync::simulation {

std::string Fault::ToString() const {
  const std::string when = absl::StrCat("at ", absl::FormatDuration(at), ": ");
  switch (kind) {
    case FaultKind::kCutConnection:
      return absl::StrCat(when, "cut rank ", rank, "'s connection");
    case FaultKind::kStallConnection:
      return absl::StrCat(when, "stall rank ", rank, "'s connection ",
                          direction == Direction::kUp ? "up" : "down", " for ",
                          absl::FormatDuration(length));
    case FaultKind::kPauseRank:
      return absl::StrCat(when, "pause rank ", rank, " for ", absl::FormatDuration(length));
    case FaultKind::kCrashCoordinator:
      return absl::StrCat(when, "crash the coordinator, restart after ",
                          absl::FormatDuration(length));
  }
  return when;
}

std::vector<Fault> DrawFaults(Rng& rng, uint32_t world_size, const FaultRates& rates) {
  std::vector<Fault> faults;
  auto add = [&](FaultKind kind, uint32_t count, absl::Duration max_length) {
    for (uint32_t i = 0; i < count; ++i) {
      Fault f;
      f.kind = kind;
      f.at = rng.Between(absl::ZeroDuration(), rates.window);
      f.rank = static_cast<uint32_t>(rng.Below(world_size));
      f.direction = rng.Chance(0.5) ? Direction::kUp : Direction::kDown;
      f.length = rng.Between(absl::ZeroDuration(), max_length);
      faults.push_back(f);
    }
  };
  add(FaultKind::kCutConnection, rng.Below(rates.max_cuts + 1), absl::ZeroDuration());
  add(FaultKind::kStallConnection, rng.Below(rates.max_stalls + 1), rates.max_stall);
  add(FaultKind::kPauseRank, rng.Below(rates.max_pauses + 1), rates.max_pause);
  add(FaultKind::kCrashCoordinator, rng.Below(rates.max_crashes + 1), rates.max_down);
  std::stable_sort(faults.begin(), faults.end(),
                   [](const Fault& a, const Fault& b) { return a.at < b.at; });
  return faults;
}

}  // namespace psync::simulation
