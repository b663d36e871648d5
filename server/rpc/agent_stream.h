// AgentStream: the server side of one psync.v1 AgentSession, the stream of a node agent that
// carries the Sessions of several ranks (see agent/README.md and docs/design.md, "Node agents").
//
// Each `attach` attaches one rank through AttachSession (session_attach.h: the same checks and
// messages as a Session's attach) with a SessionSink of its own that routes the rank's notices
// into this stream, tagged with the rank; notices of one decision for several ranks leave as one
// AgentNotice (the sinks share a corkable outbox). Each `batch` is
// expanded into its ranks' messages and applied with Coordinator::ApplyBatch, every message as its
// rank: the AgentAck lists the messages rejected with their own status. A message of a rank not
// attached on this stream is FAILED_PRECONDITION. A batch sent with lazy_ack and rejected in no
// message is answered by AgentDown.acked_through on a later message instead, at most
// `limits.lazy_ack_delay` later (a message of its own then); the answer, eager or lazy, leaves in
// the message of the notices the batch released. `detach` and the end of the stream detach ranks,
// so the coordinator's liveness sees them go. The tracker stays the only place decisions are made.
//
// Flow control, as a Session's (session_stream.h): while what is queued for the agent is over
// `limits.queue_bytes` the stream reads nothing; over it for `limits.overflow_deadline`, the
// stream ends with RESOURCE_EXHAUSTED and the agent reconnects and re-attaches its ranks, which
// get their pending directives again.
//
// The reactor never blocks on I/O and holds no lock across StartWrite. Owned by gRPC: deletes
// itself in OnDone.
#ifndef PSYNC_SERVER_RPC_AGENT_STREAM_H_
#define PSYNC_SERVER_RPC_AGENT_STREAM_H_

#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "serve/stream_writer.h"
#include "server/owner/coordinator.h"

namespace psync::server {

// Creates the reactor for one AgentSession call.
grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown>* NewAgentStream(
    Coordinator* coordinator, const serve::StreamLimits& limits);

}  // namespace psync::server

#endif  // PSYNC_SERVER_RPC_AGENT_STREAM_H_
