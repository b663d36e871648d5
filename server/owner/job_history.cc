#include "server/owner/job_history.h"

#include <iterator>
#include <utility>

#include "absl/strings/ascii.h"

namespace psync::server {

void JobHistory::Add(FinishedJob job) {
  if (capacity_ == 0) return;
  const std::string job_id = job.view.snapshot.job_id;
  if (auto earlier = by_id_.find(job_id); earlier != by_id_.end()) {
    jobs_.erase(earlier->second);  // the job's earlier run: replaced, not kept beside it
    by_id_.erase(earlier);
  } else if (jobs_.size() == capacity_) {
    by_id_.erase(jobs_.front().view.snapshot.job_id);
    jobs_.pop_front();
  }
  jobs_.push_back(std::move(job));
  by_id_[job_id] = std::prev(jobs_.end());
}

const FinishedJob* JobHistory::Find(absl::string_view job_id) const {
  auto it = by_id_.find(job_id);
  return it == by_id_.end() ? nullptr : &*it->second;
}

std::optional<std::string> CanonicalJobState(absl::string_view state) {
  std::string upper = absl::AsciiStrToUpper(state);
  if (!IsJobStateText(upper)) return std::nullopt;
  return upper;
}

}  // namespace psync::server
