// FindOwner: which coordinator replica serves a job, for benchmarks that drive raw streams at one
// coordinator. Given the replicas' addresses, it sends one rank's Join to the list entry at
// hash(job_id) % n, follows the OwnerRedirect of an UNAVAILABLE answer to the owner it names, and
// moves to the next entry when a replica is unreachable or names no owner yet. The Join it sends
// is the rank's real Join: the driver's later Join of the same rank and incarnation is a
// reconnect, which the coordinator answers with the same generation.
//
// Blocking; thread-safe (no shared state).
#ifndef PSYNC_BENCH_OWNER_PROBE_H_
#define PSYNC_BENCH_OWNER_PROBE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace psync::bench {

// The address of the replica that accepted `join` (its owner). With one target, that target
// without any call. DEADLINE_EXCEEDED when no replica accepted it within `timeout`; the Join's
// own error when a replica refused it for any other reason than not serving the job.
absl::StatusOr<std::string> FindOwner(const std::vector<std::string>& targets,
                                      const v1::JoinRequest& join, absl::Duration timeout);

}  // namespace psync::bench

#endif  // PSYNC_BENCH_OWNER_PROBE_H_
