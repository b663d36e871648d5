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
      return absl::StrCat(when, "crash the coordinator",
                          replica > 0 ? absl::StrCat(" replica-", replica) : "", ", restart after ",
                          absl::FormatDuration(length));
    case FaultKind::kRestartRank:
      return absl::StrCat(when, "restart rank ", rank, "'s process");
    case FaultKind::kPauseReplica:
      return absl::StrCat(when, "pause replica-", replica, " for ", absl::FormatDuration(length));
    case FaultKind::kPartitionEtcd:
      return absl::StrCat(when, "cut replica-", replica, " from etcd for ",
                          absl::FormatDuration(length));
    case FaultKind::kSlowEtcd:
      return absl::StrCat(when, "slow replica-", replica, "'s etcd calls by ",
                          absl::FormatDuration(extra), " each way for ",
                          absl::FormatDuration(length));
  }
  return when;
}

std::vector<Fault> DrawFaults(Rng& rng, uint32_t world_size, uint32_t replicas,
                              const FaultRates& rates) {
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
  if (replicas > 0) {
    add(FaultKind::kPauseReplica, rng.Below(rates.max_replica_pauses + 1), rates.max_replica_pause);
    add(FaultKind::kPartitionEtcd, rng.Below(rates.max_etcd_partitions + 1),
        rates.max_etcd_partition);
    add(FaultKind::kSlowEtcd, rng.Below(rates.max_etcd_slowdowns + 1), rates.max_etcd_partition);
    add(FaultKind::kRestartRank, rng.Below(rates.max_rank_restarts + 1), absl::ZeroDuration());
    // Replica faults name a replica (numbered from 1, as their addresses); crashes too.
    for (Fault& f : faults) {
      if (f.kind == FaultKind::kCutConnection || f.kind == FaultKind::kStallConnection ||
          f.kind == FaultKind::kPauseRank || f.kind == FaultKind::kRestartRank) {
        continue;
      }
      f.replica = 1 + static_cast<uint32_t>(rng.Below(replicas));
      if (f.kind == FaultKind::kSlowEtcd) {
        f.extra = rng.Between(absl::Milliseconds(50), rates.max_etcd_extra);
      }
    }
  }
  std::stable_sort(faults.begin(), faults.end(),
                   [](const Fault& a, const Fault& b) { return a.at < b.at; });
  return faults;
}

}  // namespace psync::simulation
