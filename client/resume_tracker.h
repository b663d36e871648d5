// ResumeTracker: what one rank has done in its current step, as the coordinator acknowledged it,
// so that after a coordinator restart the rank can re-join with a JoinRequest.resume (see
// docs/reliability.md, "Coordinator restart") and the new coordinator rebuilds the same decisions.
//
// The current step is the highest step the rank has reported in: a check-in, skip vote or
// SyncDone the coordinator acknowledged, or the step after a StepSkipped (a directive of the
// current step or an earlier one counts too; one of a later step, which a rank that syncs a chunk
// without staging in it can receive while it still finishes its step, waits until the rank reaches
// that step). A rank reports step s + 1 only after it finished step s (the coordinator refuses
// reports ahead of the rank's step), so everything below the current step is finished. Per current
// step it keeps:
//  * staged: acknowledged check-ins (chunk, optimizer). Check-ins not acknowledged are not listed:
//    the client sends them again after the re-join, and the new coordinator counts them once;
//  * synced: chunks whose SyncDone was acknowledged;
//  * released: chunks whose directive arrived but whose SyncDone was not acknowledged (the release
//    happened; the rank executes the sync at most once and reports it again);
//  * skip_reason: its skip vote of the current step, sent (answered or not; a vote sent while the
//    previous step's reports are unanswered waits for the rank to reach its step), until the
//    step is skipped. Else a
//    coordinator that restarted between the vote and the skip waits for the vote forever, or
//    takes the step for synced by the ranks already past it and releases its chunks;
//  * skipped_steps: the steps before the current one it saw skipped (the 64 most recent), so that
//    a rebuilt coordinator tells a step the ranks past it skipped from one they synced;
//  * released_ahead: directives of later steps it received (the 64 most recent), so that their
//    SyncDones, sent again after the re-join, are not taken for early syncs.
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
  // The rank joined; `step` is the step it starts at (JoinResponse.next_step). From now on Build
  // always has a resume, even before anything is acknowledged: a rank that re-joins a coordinator
  // that restarted must continue the job's run, never join it as a fresh rank.
  void Start(uint64_t step);
  // `up` is sent (before its answer). Only a skip vote counts here: the vote is in the resume from
  // the moment it is sent, so that a coordinator rebuilding the job knows the step may be skipped
  // even when the vote's answer was lost with the old coordinator.
  void OnSent(const psync::v1::SessionUp& up);
  // `up` was acknowledged with OK.
  void OnAcknowledged(const psync::v1::SessionUp& up);
  // A directive of (step, chunk) arrived.
  void OnDirective(uint64_t step, uint32_t chunk);
  // Every rank skipped `step`: the rank works on step + 1 now.
  void OnStepSkipped(uint64_t step);
  // The rank's latest join was answered with this JoinResponse.restarted_after: the resume names
  // it (Resume.restarted_after), so that a coordinator rebuilding the job tells this run from runs
  // that began before a later abort.
  void OnJoined(uint64_t restarted_after) { restarted_after_ = restarted_after; }

  // The resume for a re-join in `generation`; nullopt only before Start (a rank that never joined).
  std::optional<psync::v1::Resume> Build(uint64_t generation) const;

  // The current step, when there is one.
  std::optional<uint64_t> step() const { return step_; }

 private:
  // Moves to `step` when it is ahead; false when `step` is behind the current step (finished).
  bool Reach(uint64_t step);

  std::optional<uint64_t> step_;
  uint64_t restarted_after_ = 0;
  std::set<std::pair<uint32_t, std::string>> staged_;
  std::set<uint32_t> synced_;
  std::set<uint32_t> released_;
  // Its latest skip vote, sent or acknowledged: (step, reason). In the resume when it is of the
  // current step.
  std::optional<std::pair<uint64_t, std::string>> skip_vote_;
  // Steps it saw skipped, the kMaxSkippedSteps most recent (Resume.skipped_steps).
  static constexpr size_t kMaxSkippedSteps = 64;
  std::set<uint64_t> skipped_steps_;
  // Directives of steps after the current one: (step, chunk). They join `released_` when the rank
  // reaches their step.
  static constexpr size_t kMaxReleasedAhead = 64;
  std::set<std::pair<uint64_t, uint32_t>> released_ahead_;
};

// Sets the generation field of whatever `up` carries (check-ins, skip vote, SyncDones).
void SetMessageGeneration(psync::v1::SessionUp* up, uint64_t generation);

}  // namespace psync

#endif  // PSYNC_CLIENT_RESUME_TRACKER_H_
