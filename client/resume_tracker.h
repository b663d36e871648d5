// ResumeTracker: what one rank has done in its current step, as the coordinator acknowledged it,
// so that after a coordinator restart the rank can re-join with a JoinRequest.resume (see
// docs/reliability.md, "Coordinator restart") and the new coordinator rebuilds the same decisions.
//
// The current step is the highest step the rank has touched: a check-in or SyncDone the
// coordinator acknowledged, a directive received, or the step after a StepSkipped. A rank reports
// step s + 1 only after it finished step s (the coordinator refuses check-ins ahead of the rank's
// step), so everything below the current step is finished. Per current step it keeps:
//  * staged: acknowledged check-ins (chunk, optimizer). Check-ins not acknowledged are not listed:
//    the client sends them again after the re-join, and the new coordinator counts them once;
//  * synced: chunks whose SyncDone was acknowledged;
//  * released: chunks whose directive arrived but whose SyncDone was not acknowledged (the release
//    happened; the rank executes the sync at most once and reports it again).
//
// Not thread-safe: the client guards it with its mutex. Holds no references.
#ifndef PSYNC_CLIENT_RESUME_TRACKER_H_
#define PSYNC_CLIENT_RESUME_TRACKER_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "proto/psync/v1/coordinator.pb.h"

namespace psync {

class ResumeTracker {
 public:
  // `up` was acknowledged with OK.
  void OnAcknowledged(const psync::v1::SessionUp& up);
  // A directive of (step, chunk) arrived.
  void OnDirective(uint64_t step, uint32_t chunk);
  // Every rank skipped `step`: the rank works on step + 1 now.
  void OnStepSkipped(uint64_t step);

  // The resume for a re-join in `generation`; nullopt when the rank has done nothing yet (it then
  // joins like a new rank at the job's first step).
  std::optional<psync::v1::Resume> Build(uint64_t generation) const;

  // The current step, when there is one.
  std::optional<uint64_t> step() const { return step_; }

 private:
  // Moves to `step` when it is ahead; false when `step` is behind the current step (finished).
  bool Reach(uint64_t step);

  std::optional<uint64_t> step_;
  std::set<std::pair<uint32_t, std::string>> staged_;
  std::set<uint32_t> synced_;
  std::set<uint32_t> released_;
};

// Sets the generation field of whatever `up` carries (check-ins, skip vote, SyncDones).
void SetMessageGeneration(psync::v1::SessionUp* up, uint64_t generation);

}  // namespace psync

#endif  // PSYNC_CLIENT_RESUME_TRACKER_H_
