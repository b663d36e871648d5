// RelaySession: the relaying agent's server side of one downstream node agent's AgentSession. Hands
// every AgentUp it reads to the RelayHub of its job's replica (agent/relayed_routes.h) and writes
// what the hubs queue for the agent (RelayedAgent); when the stream ends the hubs detach the
// agent's ranks upstream.
//
// Never blocks; owned by gRPC (deletes itself in OnDone). Does not own the router.
#ifndef PSYNC_AGENT_RELAY_SESSION_H_
#define PSYNC_AGENT_RELAY_SESSION_H_

#include "agent/calls_in_flight.h"
#include "agent/router.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::agent {

// Creates the reactor for one AgentSession call. `router` is not owned and outlives the call (the
// reactor holds `call` until it is destroyed).
grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown>* NewRelaySession(Router* router,
                                                                     CallsInFlight::Token call);

}  // namespace psync::agent

#endif  // PSYNC_AGENT_RELAY_SESSION_H_
