// Names of the event kinds and violation classes declared in types.h, as the metrics, the event
// stream and the dashboard spell them. Pure; thread-safe.
#include "server/core/types.h"

#include "absl/strings/match.h"

namespace psync::core {

const char* ViolationKind(const Event& e) {
  if (absl::StartsWith(e.detail, "early sync")) return "early_sync";
  if (absl::StartsWith(e.detail, "repeated sync")) return "repeated_sync";
  if (absl::StartsWith(e.detail, "checksum mismatch")) return "checksum_mismatch";
  if (absl::StartsWith(e.detail, "conflicting duplicate")) return "conflicting_duplicate";
  if (absl::StartsWith(e.detail, "skip disagreement")) return "skip_disagreement";
  return "other";
}

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kJoin:
      return "join";
    case EventKind::kGeneration:
      return "generation";
    case EventKind::kCheckin:
      return "checkin";
    case EventKind::kDuplicate:
      return "duplicate";
    case EventKind::kRelease:
      return "release";
    case EventKind::kSyncDone:
      return "sync_done";
    case EventKind::kSyncComplete:
      return "sync_complete";
    case EventKind::kSkipVote:
      return "skip_vote";
    case EventKind::kStepSkipped:
      return "step_skipped";
    case EventKind::kViolation:
      return "violation";
    case EventKind::kAbort:
      return "abort";
    case EventKind::kRejected:
      return "rejected";
    case EventKind::kStall:
      return "stall";
    case EventKind::kJobEnded:
      return "job_ended";
    case EventKind::kJobEvicted:
      return "job_evicted";
    case EventKind::kRankLost:
      return "rank_lost";
  }
  return "unknown";
}

}  // namespace psync::core
