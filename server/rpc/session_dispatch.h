// ApplySessionMessage: what the coordinator does with an attached rank's `staged`, `skip`,
// `sync_done` or `leave` message (wire::DecideSessionMessage's kStaged, kSkip, kSyncDone and
// kLeave): converts it and applies it to the owner as that rank. The same for the Session reactor
// (server/rpc/session_stream.cc) and for the deterministic simulation, which drives the owner
// without gRPC (tests/simulation).
//
// Thread-safe (as Coordinator). Does not own `coordinator`.
#ifndef PSYNC_SERVER_RPC_SESSION_DISPATCH_H_
#define PSYNC_SERVER_RPC_SESSION_DISPATCH_H_

#include <string>

#include "absl/status/status.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "server/core/types.h"
#include "server/owner/coordinator.h"
#include "wire/session_protocol.h"

namespace psync::server {

// Applies `up` as (job_id, rank)'s message of kind `action`; returns the status its Ack carries.
// INTERNAL for an action that is not one of the four (decided by the caller, never applied).
absl::Status ApplySessionMessage(Coordinator& coordinator, const std::string& job_id,
                                 core::RankId rank, wire::SessionAction action,
                                 const v1::SessionUp& up);

}  // namespace psync::server

#endif  // PSYNC_SERVER_RPC_SESSION_DISPATCH_H_
