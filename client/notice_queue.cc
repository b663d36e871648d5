#include "client/notice_queue.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "serve/injected_faults.h"

namespace psync {

void NoticeQueue::SetGeneration(uint64_t generation) {
  absl::MutexLock lock(&mu_);
  if (generation == generation_) return;
  generation_ = generation;
  newest_step_ = 0;
  seen_.clear();
  ready_.clear();
  skipped_.clear();
  abort_.reset();
}

void NoticeQueue::ContinueGeneration(uint64_t generation) {
  absl::MutexLock lock(&mu_);
  generation_ = generation;
  for (auto& [key, directive] : ready_) directive.set_generation(generation);
  abort_.reset();
}

NoticeQueue::AddResult NoticeQueue::Add(const psync::v1::SessionDown& notice) {
  absl::MutexLock lock(&mu_);
  switch (notice.kind_case()) {
    case psync::v1::SessionDown::kDirective: {
      const psync::v1::SyncDirective& d = notice.directive();
      if (d.generation() != generation_) {
        ++counters_.stale_notices;
        return AddResult::kStale;
      }
      const Key key{d.step(), d.chunk()};
      const bool too_old = newest_step_ > window_steps_ && d.step() < newest_step_ - window_steps_;
      const bool repeated = !seen_.insert(key).second &&
                            !serve::IsInjected(serve::Injected().accept_repeated_directives);
      if (too_old || repeated) {
        ++counters_.duplicate_directives;
        return AddResult::kDuplicate;
      }
      ready_.emplace(key, d);
      ++counters_.directives_received;
      if (d.step() > newest_step_) {
        newest_step_ = d.step();
        Trim();
      }
      return AddResult::kAccepted;
    }
    case psync::v1::SessionDown::kStepSkipped: {
      const psync::v1::StepSkipped& s = notice.step_skipped();
      if (s.generation() != generation_) {
        ++counters_.stale_notices;
        return AddResult::kStale;
      }
      if (!skipped_.insert(s.step()).second) return AddResult::kDuplicate;
      if (s.step() > newest_step_) {
        newest_step_ = s.step();
        Trim();
      }
      return AddResult::kAccepted;
    }
    case psync::v1::SessionDown::kAbort: {
      const psync::v1::Abort& a = notice.abort();
      if (a.generation() != generation_) {
        ++counters_.stale_notices;
        return AddResult::kStale;
      }
      if (abort_.has_value()) return AddResult::kDuplicate;
      abort_ = a;
      return AddResult::kAccepted;
    }
    default:
      return AddResult::kIgnored;
  }
}

void NoticeQueue::Trim() {
  if (newest_step_ <= window_steps_) return;
  const uint64_t keep_from = newest_step_ - window_steps_;
  while (!seen_.empty() && seen_.begin()->first < keep_from) seen_.erase(seen_.begin());
  while (!ready_.empty() && ready_.begin()->first.first < keep_from) ready_.erase(ready_.begin());
  while (!skipped_.empty() && *skipped_.begin() < keep_from) skipped_.erase(skipped_.begin());
}

absl::Status NoticeQueue::Terminal() const {
  if (!failed_.ok()) return failed_;
  if (abort_.has_value()) {
    return absl::AbortedError(absl::StrCat("generation ", abort_->generation(), " aborted at step ",
                                           abort_->step(), ": ", abort_->reason()));
  }
  return absl::OkStatus();
}

void NoticeQueue::AwaitUntil(const absl::Condition& condition, absl::Time deadline) {
  // A deadline already passed only looks (a poll): absl's timed wait would still block in the
  // kernel for a scheduler round.
  if (condition.Eval() || deadline <= absl::Now()) return;
  mu_.AwaitWithDeadline(condition, deadline);
}

absl::StatusOr<psync::v1::SyncDirective> NoticeQueue::WaitForDirective(uint64_t step,
                                                                       uint32_t chunk,
                                                                       absl::Time deadline) {
  const Key key{step, chunk};
  auto done = [this, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !Terminal().ok() || ready_.contains(key);
  };
  absl::MutexLock lock(&mu_);
  AwaitUntil(absl::Condition(&done), deadline);
  if (absl::Status s = Terminal(); !s.ok()) return s;
  auto it = ready_.find(key);
  if (it == ready_.end()) {
    return absl::DeadlineExceededError(absl::StrCat("no sync directive for generation ",
                                                    generation_, " step ", step, " chunk ", chunk,
                                                    " before the deadline"));
  }
  psync::v1::SyncDirective directive = std::move(it->second);
  ready_.erase(it);
  return directive;
}

absl::Status NoticeQueue::WaitForStepSkipped(uint64_t step, absl::Time deadline) {
  auto done = [this, step]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !Terminal().ok() || skipped_.contains(step);
  };
  absl::MutexLock lock(&mu_);
  AwaitUntil(absl::Condition(&done), deadline);
  if (absl::Status s = Terminal(); !s.ok()) return s;
  if (!skipped_.contains(step)) {
    return absl::DeadlineExceededError(absl::StrCat("no StepSkipped for generation ", generation_,
                                                    " step ", step, " before the deadline"));
  }
  return absl::OkStatus();
}

bool NoticeQueue::HasStepSkipped(uint64_t step) const {
  absl::MutexLock lock(&mu_);
  return skipped_.contains(step);
}

void NoticeQueue::Fail(absl::Status status) {
  if (status.ok()) status = absl::InternalError("NoticeQueue::Fail called with OK");
  absl::MutexLock lock(&mu_);
  if (failed_.ok()) failed_ = std::move(status);
}

NoticeQueue::Counters NoticeQueue::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

}  // namespace psync
