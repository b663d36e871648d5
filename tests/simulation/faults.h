// Faults: what goes wrong in one simulated run, drawn from its seed: connections cut, one
// direction of a connection stalled (a partition that heals), ranks paused (a long GC), the
// coordinator (or one replica) crashed (its state lost) and restarted; with replicas also a
// replica paused, a replica's link to etcd cut or slowed for a while, and a rank's process
// restarted. A run's faults are a
// plain list, so a failing run can be re-run with fewer of them (Shrink in simulation.h) to find
// the few that matter.
//
// Plain values; thread-compatible.
#ifndef PSYNC_TESTS_SIMULATION_FAULTS_H_
#define PSYNC_TESTS_SIMULATION_FAULTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tests/simulation/network.h"
#include "tests/simulation/world.h"

namespace psync::simulation {

enum class FaultKind {
  kCutConnection,     // the rank's connection is cut
  kStallConnection,   // one direction of the rank's connection holds its messages for `length`
  kPauseRank,         // the rank handles nothing for `length`
  kCrashCoordinator,  // the coordinator (replica `replica`) crashes; it restarts after `length`
  kPauseReplica,      // replica `replica` handles nothing for `length`
  kPartitionEtcd,     // replica `replica` cannot reach etcd for `length`
  kSlowEtcd,          // replica `replica`'s etcd calls take `extra` longer each way for `length`
  kRestartRank,       // the rank's process restarts (drawn with replicas)
};

struct Fault {
  absl::Duration at;  // after the run's start
  FaultKind kind = FaultKind::kCutConnection;
  uint32_t rank = 0;  // connection and rank faults
  Direction direction = Direction::kUp;
  absl::Duration length;
  uint32_t replica = 0;  // replica faults
  absl::Duration extra;  // kSlowEtcd

  std::string ToString() const;
};

struct FaultRates {
  absl::Duration window = absl::Seconds(2);  // faults happen in [0, window)
  uint32_t max_cuts = 8;
  uint32_t max_stalls = 4;
  uint32_t max_pauses = 3;
  uint32_t max_crashes = 2;
  absl::Duration max_stall = absl::Milliseconds(300);
  absl::Duration max_pause = absl::Seconds(1);
  absl::Duration max_down = absl::Seconds(1);
  // With replicas (their lease TTL is 2 s, margin 0.5 s: these reach past it).
  uint32_t max_replica_pauses = 2;
  uint32_t max_etcd_partitions = 2;
  uint32_t max_etcd_slowdowns = 2;
  absl::Duration max_replica_pause = absl::Seconds(6);
  absl::Duration max_etcd_partition = absl::Seconds(3);
  absl::Duration max_etcd_extra = absl::Milliseconds(600);
  uint32_t max_rank_restarts = 2;
};

// The faults of one run, ordered by time. `replicas` 0: a single coordinator (the replica faults
// are not drawn, and the draw is what it was before replicas existed).
std::vector<Fault> DrawFaults(Rng& rng, uint32_t world_size, uint32_t replicas,
                              const FaultRates& rates);

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_FAULTS_H_
