#include "client/resume_tracker.h"

namespace psync {

bool ResumeTracker::Reach(uint64_t step) {
  if (step_.has_value() && step < *step_) return false;
  if (!step_.has_value() || step > *step_) {
    step_ = step;
    staged_.clear();
    synced_.clear();
    released_.clear();
    if (skip_vote_.has_value() && skip_vote_->first < step) skip_vote_.reset();
    // Directives of this step that arrived while the rank was still finishing an earlier one.
    while (!released_ahead_.empty() && released_ahead_.begin()->first <= step) {
      if (released_ahead_.begin()->first == step) released_.insert(released_ahead_.begin()->second);
      released_ahead_.erase(released_ahead_.begin());
    }
  }
  return true;
}

void ResumeTracker::OnAcknowledged(const psync::v1::SessionUp& up) {
  switch (up.kind_case()) {
    case psync::v1::SessionUp::kStaged:
      for (const psync::v1::Staged& item : up.staged().items()) {
        if (Reach(item.step())) staged_.emplace(item.chunk(), item.optimizer());
      }
      break;
    case psync::v1::SessionUp::kSyncDone:
      for (const psync::v1::SyncDone& item : up.sync_done().items()) {
        if (Reach(item.step())) synced_.insert(item.chunk());
      }
      break;
    case psync::v1::SessionUp::kSkip:
      if (Reach(up.skip().step())) skip_vote_.emplace(up.skip().step(), up.skip().reason());
      break;
    default:
      break;
  }
}

void ResumeTracker::OnSent(const psync::v1::SessionUp& up) {
  // Recorded without moving to the vote's step: the previous step's reports may be unanswered.
  if (up.has_skip() && (!step_.has_value() || up.skip().step() >= *step_)) {
    skip_vote_.emplace(up.skip().step(), up.skip().reason());
  }
}

void ResumeTracker::Start(uint64_t step) {
  if (!step_.has_value()) Reach(step);
}

void ResumeTracker::OnDirective(uint64_t step, uint32_t chunk) {
  // A directive is not a report: it may come for a later step (of a chunk the rank syncs but does
  // not stage) while the rank still finishes the current one, whose reports may be unanswered.
  if (step_.has_value() && step > *step_) {
    released_ahead_.emplace(step, chunk);
    while (released_ahead_.size() > kMaxReleasedAhead)
      released_ahead_.erase(released_ahead_.begin());
    return;
  }
  if (Reach(step)) released_.insert(chunk);
}

void ResumeTracker::OnStepSkipped(uint64_t step) {
  skipped_steps_.insert(step);
  while (skipped_steps_.size() > kMaxSkippedSteps) skipped_steps_.erase(skipped_steps_.begin());
  Reach(step + 1);
}

std::optional<psync::v1::Resume> ResumeTracker::Build(uint64_t generation) const {
  if (!step_.has_value()) return std::nullopt;
  psync::v1::Resume resume;
  resume.set_generation(generation);
  resume.set_step(*step_);
  resume.set_restarted_after(restarted_after_);
  for (const auto& [chunk, optimizer] : staged_) {
    psync::v1::Staged* item = resume.add_staged();
    item->set_step(*step_);
    item->set_chunk(chunk);
    item->set_optimizer(optimizer);
  }
  for (uint32_t chunk : synced_) resume.add_synced_chunks(chunk);
  for (uint32_t chunk : released_) {
    if (synced_.count(chunk) == 0) resume.add_released_chunks(chunk);
  }
  for (const auto& [step, chunk] : released_ahead_) {
    psync::v1::ReleasedAhead* ahead = resume.add_released_ahead();
    ahead->set_step(step);
    ahead->set_chunk(chunk);
  }
  for (uint64_t skipped : skipped_steps_) {
    if (skipped < *step_) resume.add_skipped_steps(skipped);
  }
  // An empty reason still voted: it is sent as "skip" (the coordinator needs a non-empty one).
  if (skip_vote_.has_value() && skip_vote_->first == *step_) {
    resume.set_skip_reason(skip_vote_->second.empty() ? "skip" : skip_vote_->second);
  }
  return resume;
}

void SetMessageGeneration(psync::v1::SessionUp* up, uint64_t generation) {
  switch (up->kind_case()) {
    case psync::v1::SessionUp::kStaged:
      up->mutable_staged()->set_generation(generation);
      break;
    case psync::v1::SessionUp::kSkip:
      up->mutable_skip()->set_generation(generation);
      break;
    case psync::v1::SessionUp::kSyncDone:
      up->mutable_sync_done()->set_generation(generation);
      break;
    case psync::v1::SessionUp::kAttach:
      up->mutable_attach()->set_generation(generation);
      break;
    case psync::v1::SessionUp::kLeave:
      up->mutable_leave()->set_generation(generation);
      break;
    default:
      break;
  }
}

}  // namespace psync
