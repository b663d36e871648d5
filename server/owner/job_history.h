// JobHistory: the jobs that left the coordinator (ended or evicted), newest last, at most
// `capacity` of them, each with its final status and audit, so that status queries, ListJobs and
// the dashboard still say what happened to a job after it ended. It holds one entry per job id:
// the job's last run. A job evicted, joined again and then ended or evicted again replaces its
// earlier entry (which moves to the newest position); adding a new id beyond the capacity drops
// the oldest.
// Not thread-safe: the owner (the Coordinator) guards it with its lock.
#ifndef PSYNC_SERVER_OWNER_JOB_HISTORY_H_
#define PSYNC_SERVER_OWNER_JOB_HISTORY_H_

#include <cstddef>
#include <list>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "server/observe/job_observer.h"
#include "server/owner/job_view.h"

namespace psync::server {

struct FinishedJob {
  JobStatusView view;  // as it was when the job left; view.end says how, why and when
  std::vector<observe::SyncAudit> audit;
  // With replicas: the parts of the job's audit its earlier owners published, as they were when
  // it ended (JobGate::EarlierOwnerAudits).
  std::vector<std::string> earlier_owners;
};

class JobHistory {
 public:
  explicit JobHistory(size_t capacity) : capacity_(capacity) {}
  JobHistory(const JobHistory&) = delete;
  JobHistory& operator=(const JobHistory&) = delete;

  // Keeps `job` as the newest, in place of the entry its id already had (an earlier run); drops
  // the oldest beyond the capacity (nothing is kept at 0).
  void Add(FinishedJob job);
  // The finished job with this id, or null. Valid until the next Add.
  const FinishedJob* Find(absl::string_view job_id) const;
  // Oldest first; each job id at most once.
  const std::list<FinishedJob>& jobs() const { return jobs_; }
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  std::list<FinishedJob> jobs_;
  // job id -> its entry in jobs_.
  absl::flat_hash_map<std::string, std::list<FinishedJob>::iterator> by_id_;
};

// The job state names ListJobs filters on (JobStateText's values), for error messages.
inline constexpr absl::string_view kJobStateNames =
    "FORMING, RUNNING, DEGRADED, ABORTED, ENDED, EVICTED";

// `state` as JobStateText writes it when it names a job state in any ASCII case ("running",
// "Ended" -> "RUNNING", "ENDED"); nullopt when it names none. ListJobs' `states` filter (gRPC and
// /api/jobs) reads its names through this.
std::optional<std::string> CanonicalJobState(absl::string_view state);

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_JOB_HISTORY_H_
