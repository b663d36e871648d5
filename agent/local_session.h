// LocalSession: the agent's server side of one local rank's psync.v1 Session. Speaks the
// coordinator's Session protocol unchanged, decided by the same code (wire/session_protocol.h),
// so psync::Client works against the agent as against the coordinator: the first message must be
// `attach`, which is forwarded upstream (the coordinator checks and answers it); staged, skip
// and sync_done messages are queued upstream (merged with other ranks' there) and each is answered
// by an Ack with the coordinator's status for it; notices arrive through the Session's LocalRank.
// The attach goes to the Upstream of the replica the rank's job is routed to then
// (agent/router.h); the Session's later messages and its detach follow it there. When the Session
// ends, its rank is detached upstream.
//
// Refusals are the coordinator's (session_protocol.h): a first message that is not attach, or bytes
// that do not parse as a SessionUp, end the Session with INVALID_ARGUMENT (counted in the agent's
// local_rejected); a refused attach ends it with the coordinator's status, never an Ack.
//
// Differences from a Session on the coordinator: messages are read while the attach is still on
// its way (they follow it upstream, and fail if it is refused); a message's Ack may come after
// the directive it caused.
//
// Never blocks; owned by gRPC (deletes itself in OnDone). Does not own the router or Upstreams.
#ifndef PSYNC_AGENT_LOCAL_SESSION_H_
#define PSYNC_AGENT_LOCAL_SESSION_H_

#include "agent/calls_in_flight.h"
#include "agent/router.h"
#include "agent/stats.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "wire/session_up_frame.h"

namespace psync::agent {

// Creates the reactor for one Session call. Neither pointer is owned; both outlive the call. The
// reactor holds `call` until it is destroyed. Served as wire/session_up_frame.h's
// NewSessionHandler says.
wire::SessionReactor* NewLocalSession(Router* router, AgentCounters* counters,
                                      CallsInFlight::Token call);

}  // namespace psync::agent

#endif  // PSYNC_AGENT_LOCAL_SESSION_H_
