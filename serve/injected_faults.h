// InjectedFaults: known bugs, each behind a switch, that the deterministic simulation
// (tests/simulation, tools/simulate --negative-controls) turns on one at a time to show it catches
// them. A simulator that finds nothing proves nothing until it finds these.
//
// Every switch is off in every binary; only the simulator's negative controls set one, before the
// simulated world starts. The code under test reads a switch with one relaxed atomic load, where
// the bug would be. Thread-safe.
#ifndef PSYNC_SERVE_INJECTED_FAULTS_H_
#define PSYNC_SERVE_INJECTED_FAULTS_H_

#include <atomic>

namespace psync::serve {

struct InjectedFaults {
  // The release rule releases a (step, chunk) when all but one of its two or more declared
  // contributors staged (server/core/release_rule.cc): an early sync.
  std::atomic<bool> release_one_early{false};
  // The release rule forgets that a (step, chunk) was released: a repeated check-in releases it
  // again, with a new sequence number (a second sync of one step).
  std::atomic<bool> release_again{false};
  // The client's notice queue accepts a directive it has already seen (client/notice_queue.cc):
  // the directive a coordinator re-sends after a reconnect reaches the training loop twice.
  std::atomic<bool> accept_repeated_directives{false};
  // A coordinator replica keeps serving its jobs past its lease's deadline
  // (server/ha/ownership.cc): it may release after etcd expired its lease and another replica took
  // the job over.
  std::atomic<bool> skip_fencing{false};
  // The deadline no longer ends a replica's lease for good: a keepalive sent before it and answered
  // after it revives the lease, and a job refused as lost is served again at the same epoch.
  std::atomic<bool> revive_lapsed_lease{false};
  // A replica answers reads (job status) from whatever state it holds, whether or not it serves
  // the job now (server/owner/coordinator_replicas.cc).
  std::atomic<bool> unfenced_reads{false};
  // A replica takes a job key created under an earlier lease of its own address (its lapsed lease,
  // or its previous process's) as its own and serves the job at that older epoch
  // (server/ha/ownership.cc), though etcd deletes the key when that lease expires and another
  // replica may then claim the job.
  std::atomic<bool> accept_stale_epoch{false};
  // A new owner that opened a generation for a fresh joiner merges a later resume of a higher
  // generation into it (server/core/job_tracker_join.cc): the resumed client's generation number
  // goes down to one the old owner used.
  std::atomic<bool> repeat_generation_on_move{false};
};

// The one set of switches of this process.
inline InjectedFaults& Injected() {
  static InjectedFaults faults;
  return faults;
}

inline bool IsInjected(const std::atomic<bool>& fault) {
  return fault.load(std::memory_order_relaxed);
}

}  // namespace psync::serve

#endif  // PSYNC_SERVE_INJECTED_FAULTS_H_
