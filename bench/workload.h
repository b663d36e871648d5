// The benchmark's job shape, shared by its rank and node drivers: what each simulated rank
// declares when it joins (every rank a member of every chunk through one sync group, `optimizers`
// optimizers per chunk) and what it reports when a sync is done.
//
// Pure functions; thread-safe.
#ifndef PSYNC_BENCH_WORKLOAD_H_
#define PSYNC_BENCH_WORKLOAD_H_

#include <cstdint>
#include <string>

#include "proto/psync/v1/coordinator.pb.h"

namespace psync::bench {

struct Workload {
  std::string job_id = "bench";
  uint32_t ranks = 8;
  uint32_t optimizers = 2;
  uint32_t chunks = 8;
  // Sync group size; 0: one group "dp" holding every rank.
  uint32_t group_size = 0;
  uint64_t seed = 1;
};

// The name of optimizer k of every rank ("opt0", "opt1", ...).
std::string OptimizerName(uint32_t k);

// The sync group of `rank`: "dp" (one group) or "dp<g>" for groups of group_size ranks.
std::string GroupName(const Workload& w, uint32_t rank);

// The Join of `rank`: every chunk, every optimizer, its sync group, first step 0.
v1::JoinRequest JoinRequestFor(const Workload& w, uint32_t rank);

// The SyncDone `rank` reports for (step, chunk): one execution, a checksum every member agrees on.
v1::SyncDone SyncDoneFor(const Workload& w, uint32_t rank, uint64_t step, uint32_t chunk);

}  // namespace psync::bench

#endif  // PSYNC_BENCH_WORKLOAD_H_
