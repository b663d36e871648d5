#include "server/job_history.h"

#include <utility>

namespace psync::server {

void JobHistory::Add(FinishedJob job) {
  if (capacity_ == 0) return;
  if (jobs_.size() == capacity_) {
    const FinishedJob& oldest = jobs_.front();
    auto it = newest_.find(oldest.view.snapshot.job_id);
    if (it != newest_.end() && it->second == &oldest) newest_.erase(it);
    jobs_.pop_front();
  }
  jobs_.push_back(std::move(job));
  newest_[jobs_.back().view.snapshot.job_id] = &jobs_.back();
}

const FinishedJob* JobHistory::Find(absl::string_view job_id) const {
  auto it = newest_.find(job_id);
  return it == newest_.end() ? nullptr : it->second;
}

}  // namespace psync::server
