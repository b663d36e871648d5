// AttachSession: the coordinator's handling of one `attach`, the same for a rank's own Session
// (server/rpc/session_stream.cc) and for a rank attached through a node agent's AgentSession
// (server/rpc/agent_stream.cc): the attach's fields are checked (CheckAttach in
// session_protocol.h), then Coordinator::Attach attaches `sink` as the rank's session.
//
// Returns the notices the rank must hold now (to be written after the attach's Ack), or the
// refusal as AttachRefused makes it ("attach: " + the reason, the reason's code): a refused
// Session ends with it, an AgentSession acks the attach with it. A refusal attaches nothing; it is
// recorded as rejected (the job's counter when the job is known, and a kRejected event).
//
// Thread-safe (as Coordinator). Does not own `coordinator`; shares `sink` with it on success.
#ifndef PSYNC_SERVER_RPC_SESSION_ATTACH_H_
#define PSYNC_SERVER_RPC_SESSION_ATTACH_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "server/core/types.h"
#include "server/owner/coordinator.h"
#include "server/owner/session_sink.h"

namespace psync::server {

absl::StatusOr<std::vector<core::Notice>> AttachSession(Coordinator& coordinator,
                                                        const v1::Attach& attach,
                                                        std::shared_ptr<SessionSink> sink);

}  // namespace psync::server

#endif  // PSYNC_SERVER_RPC_SESSION_ATTACH_H_
