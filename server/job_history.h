// JobHistory: the jobs that left the coordinator (ended or evicted), newest last, at most
// `capacity` of them, each with its final status and audit, so that status queries, ListJobs and
// the dashboard still say what happened to a job after it ended. Adding a job beyond the capacity
// drops the oldest. A job id may appear more than once (a job evicted, started again and ended);
// Find returns the newest.
// Not thread-safe: the owner (the Coordinator) guards it with its lock.
#ifndef PSYNC_SERVER_JOB_HISTORY_H_
#define PSYNC_SERVER_JOB_HISTORY_H_

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "server/job_view.h"
#include "server/observe/job_observer.h"

namespace psync::server {

struct FinishedJob {
  JobStatusView view;  // as it was when the job left; view.end says how, why and when
  std::vector<observe::SyncAudit> audit;
};

class JobHistory {
 public:
  explicit JobHistory(size_t capacity) : capacity_(capacity) {}
  JobHistory(const JobHistory&) = delete;
  JobHistory& operator=(const JobHistory&) = delete;

  // Keeps `job` as the newest; drops the oldest beyond the capacity (nothing is kept at 0).
  void Add(FinishedJob job);
  // The newest finished job with this id, or null. Valid until the next Add.
  const FinishedJob* Find(absl::string_view job_id) const;
  // Oldest first.
  const std::deque<FinishedJob>& jobs() const { return jobs_; }
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  std::deque<FinishedJob> jobs_;
  // job id -> its newest entry in jobs_ (deque elements stay put on push_back and pop_front).
  absl::flat_hash_map<std::string, const FinishedJob*> newest_;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_JOB_HISTORY_H_
