// Coordinator::EnforceLiveness: idle eviction, lost ranks, aborts and stalls over every job.
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/owner/coordinator.h"

namespace psync::server {

std::vector<core::Event> Coordinator::EnforceLiveness() {
  Effects out;
  {
    TimedMutexLock lock(&mu_, &lock_times_);
    const absl::Time now = clock_->Now();
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      absl::Duration idle = -absl::InfiniteDuration();  // a job with a session is never idle
      {
        Job& job = *it->second;
        absl::MutexLock job_lock(&job.mu);
        if (job.sessions.empty()) idle = now - job.last_activity;
      }
      if (idle >= options_.job_idle_ttl) {
        FinishJob(it++, JobEndKind::kEvicted,
                  absl::StrCat("no session and no message for ", absl::FormatDuration(idle),
                               " (job_idle_ttl ", absl::FormatDuration(options_.job_idle_ttl), ")"),
                  now, &out);
      } else {
        ++it;
      }
    }
    for (auto& [id, job] : jobs_) {
      absl::MutexLock job_lock(&job->mu);
      job->EnforceLiveness(liveness_rules(), now, &out);
      job->FindStalls(now, &out);
    }
    delivery_.Commit(&out);
  }
  std::vector<core::Event> found;
  if (out.committed != nullptr) {
    for (const core::Event& e : *out.committed) {
      if (e.kind == core::EventKind::kStall || e.kind == core::EventKind::kRankLost ||
          e.kind == core::EventKind::kJobEvicted) {
        found.push_back(e);
      }
    }
  }
  delivery_.Deliver(out);
  return found;
}

}  // namespace psync::server
