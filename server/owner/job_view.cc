#include "server/owner/job_view.h"

namespace psync::server {

std::string JobStateText(const JobStatusView& view) {
  switch (view.end.kind) {
    case JobEndKind::kEnded:
      return "ENDED";
    case JobEndKind::kEvicted:
      return "EVICTED";
    case JobEndKind::kLive:
      break;
  }
  if (!view.lost_ranks.empty() && view.snapshot.state != core::JobState::kAborted) {
    return "DEGRADED";
  }
  return core::JobStateName(view.snapshot.state);
}

bool IsJobStateText(const std::string& state) {
  for (const char* name : {"FORMING", "RUNNING", "DEGRADED", "ABORTED", "ENDED", "EVICTED"}) {
    if (state == name) return true;
  }
  return false;
}

}  // namespace psync::server
