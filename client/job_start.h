// JobStartIndex: which of a replica list's `n` entries (n >= 1) a job's first call goes to, the
// same for psync::Client and psync-agent, so that jobs spread over the replicas before any
// redirect and a rank and its node's agent start on the same one. Pure; thread-safe.
#ifndef PSYNC_CLIENT_JOB_START_H_
#define PSYNC_CLIENT_JOB_START_H_

#include <cstddef>
#include <functional>
#include <string>

namespace psync {

inline size_t JobStartIndex(const std::string& job_id, size_t n) {
  return std::hash<std::string>{}(job_id) % n;
}

}  // namespace psync

#endif  // PSYNC_CLIENT_JOB_START_H_
