// ApplySessionMessage; contract: session_dispatch.h.
#include "server/rpc/session_dispatch.h"

#include "server/rpc/convert.h"
#include "wire/bounded_text.h"

namespace psync::server {

absl::Status ApplySessionMessage(Coordinator& coordinator, const std::string& job_id,
                                 core::RankId rank, wire::SessionAction action,
                                 const v1::SessionUp& up) {
  switch (action) {
    case wire::SessionAction::kStaged:
      return coordinator.Stage(job_id, rank, up.staged().generation(),
                               StagedFromProto(up.staged()));
    case wire::SessionAction::kSkip:
      return coordinator.Skip(job_id, rank, up.skip().generation(), up.skip().step(),
                              wire::BoundEcho(up.skip().reason()));
    case wire::SessionAction::kSyncDone:
      return coordinator.SyncDone(job_id, rank, up.sync_done().generation(),
                                  SyncDoneFromProto(up.sync_done()));
    case wire::SessionAction::kLeave:
      return coordinator.Leave(job_id, rank, up.leave().generation(), up.leave().finished());
    case wire::SessionAction::kClose:
    case wire::SessionAction::kAttach:
    case wire::SessionAction::kAck:
      break;  // decided by the caller, never applied
  }
  return absl::InternalError("ApplySessionMessage: not a message for the tracker");
}

}  // namespace psync::server
