// StagedAdds: what a relay has handed to one downstream agent and not yet added to that agent's
// down queue (agent/relayed_agent.h). A relay splits each coordinator message into one share per
// agent and hands the shares to fan-out threads (agent/fanout_pool.h); when the coordinator's
// next message arrives before an agent's earlier share was written, the two shares are staged
// together and leave in one message, where handing them over one by one would write one message
// each. Nothing waits for that: the first share staged schedules the drain, and whatever is staged
// before the drain runs goes with it.
//
// Stage() says whether the caller must arrange a Drain(): true for the first add staged since the
// last Take(), false while one is already due. Take() returns the staged adds in the order
// staged. So every add staged is taken exactly once, by the drain that its own Stage() (or an
// earlier one's) arranged, and the adds of one producer stay in order.
//
// Thread-safe. Holds the adds only; what runs them is the caller's.
#ifndef PSYNC_AGENT_STAGED_ADDS_H_
#define PSYNC_AGENT_STAGED_ADDS_H_

#include <functional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace psync::agent {

template <typename Queue>
class StagedAdds {
 public:
  // One share: what it adds to the queue, then what runs once the queue holds it.
  struct Add {
    std::function<void(Queue&)> add;
    std::function<void()> queued;  // may be empty
  };

  // Stages `add`; true when the caller must arrange a drain (none was due).
  bool Stage(Add add) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    staged_.push_back(std::move(add));
    if (drain_due_) return false;
    drain_due_ = true;
    return true;
  }

  // Every add staged, oldest first; the next Stage() arranges a drain again.
  std::vector<Add> Take() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    drain_due_ = false;
    return std::exchange(staged_, {});
  }

 private:
  absl::Mutex mu_;
  std::vector<Add> staged_ ABSL_GUARDED_BY(mu_);
  bool drain_due_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_STAGED_ADDS_H_
