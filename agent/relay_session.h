// RelaySession: the relaying agent's server side of one downstream node agent's AgentSession. Hands
// every AgentUp it reads to the RelayHub (agent/relay_hub.h) and writes what the hub queues for the
// agent (RelayedAgent); when the stream ends the hub detaches the agent's ranks upstream.
//
// Never blocks; owned by gRPC (deletes itself in OnDone). Does not own the hub.
#ifndef PSYNC_AGENT_RELAY_SESSION_H_
#define PSYNC_AGENT_RELAY_SESSION_H_

#include "agent/calls_in_flight.h"
#include "agent/relay_hub.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::agent {

// Creates the reactor for one AgentSession call. `hub` is not owned and outlives the call (the
// reactor holds `call` until it is destroyed).
grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown>* NewRelaySession(RelayHub* hub,
                                                                     CallsInFlight::Token call);

}  // namespace psync::agent

#endif  // PSYNC_AGENT_RELAY_SESSION_H_
