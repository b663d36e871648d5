// LocalCompletion: tells a node agent when the check-ins it queued complete a (step, chunk) on
// this node, i.e. every local rank that declared the chunk (in the Join it forwarded) has checked
// in with every optimizer it declared there. The agent then writes at once instead of waiting for
// its flush window: the check-in that completes a chunk everywhere is always the last local one
// on its node, so a window trades no release latency for its merging.
//
// A check-in of a rank whose plan the agent has not seen (it joined elsewhere, or before the agent
// restarted; its job's plans were forgotten), or of a chunk its plan does not declare, is written
// at once too: the agent cannot tell whether a release waits for it, so it never holds it back.
//
// Only a hint: a wrong answer (a repeated check-in, a count dropped) makes a write early or leaves
// it to the window, never changes what the coordinator decides.
// Counts are kept per (job, step, chunk) until complete; at most `max_open` of them, the oldest
// steps dropped first. Plans are kept for the `max_jobs` jobs declared most recently.
//
// Thread-compatible (the upstream calls it under its lock).
#ifndef PSYNC_AGENT_LOCAL_COMPLETION_H_
#define PSYNC_AGENT_LOCAL_COMPLETION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace psync::agent {

class LocalCompletion {
 public:
  explicit LocalCompletion(size_t max_open = 4096, size_t max_jobs = 64)
      : max_open_(max_open), max_jobs_(max_jobs) {}

  // A local rank joined with `join` (its latest plan replaces an earlier one of the rank).
  void Declare(const v1::JoinRequest& join);
  // One check-in of `rank` in `job` queued. True when it is to be written at once: it completes
  // (step, chunk) on this node, or the rank's plan is unknown here or does not declare `chunk`.
  bool Checkin(const std::string& job, uint32_t rank, uint64_t step, uint32_t chunk);

  // Check-ins the node's ranks declared for `chunk` of `job` (0: none known).
  uint32_t Expected(const std::string& job, uint32_t chunk) const;
  size_t open() const { return open_.size(); }
  size_t jobs() const { return jobs_.size(); }

 private:
  using RankChunks = absl::flat_hash_map<uint32_t, uint32_t>;  // chunk -> optimizers declared
  struct Job {
    absl::flat_hash_map<uint32_t, RankChunks> ranks;   // rank -> its declared chunks
    absl::flat_hash_map<uint32_t, uint32_t> expected;  // chunk -> sum over ranks
    uint64_t declared = 0;                             // order of its latest Declare
  };
  using Key = std::tuple<uint64_t, std::string, uint32_t>;  // (step, job, chunk): oldest first

  const size_t max_open_;
  const size_t max_jobs_;
  uint64_t declares_ = 0;
  absl::flat_hash_map<std::string, Job> jobs_;
  absl::btree_map<Key, uint32_t> open_;  // check-ins counted so far
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_LOCAL_COMPLETION_H_
