// SessionStream: the server side of one psync.v1 Session (a bidirectional stream of one rank).
//
// The Session's rules are session_protocol.h's: the first message up must be `attach` (checked and
// attached by AttachSession); a failed attach ends the stream with the attach's status, never an
// Ack. Every later message is answered by an Ack carrying the coordinator's status
// (wire_status.h), or, accepted and sent with lazy_ack, by a later message (below). Bytes that do
// not parse as a SessionUp end the stream with INVALID_ARGUMENT (messages are read as
// SessionUpFrames: session_up_frame.h). Every refusal is counted as rejected by the job it names,
// where known (Coordinator::RecordRejected, or the tracker's own checks). Notices for the rank
// arrive through a SessionStreamSink (a SessionSink) that queues them and writes one at a time; the
// reactor never blocks on I/O and holds no lock across StartWrite. Owned by gRPC: deletes itself in
// OnDone.
//
// Lazy acks: an accepted staged, skip or sync_done message sent with lazy_ack is answered by the
// next message written on the stream (SessionDown.acked_through), or by a message of its own
// `limits.lazy_ack_delay` later (a grpc::Alarm per first pending lazy ack); with a zero delay every
// message gets its Ack at once. Refusals are always Acks of their own, at once.
//
// Flow control: while the queue is over `limits.queue_bytes` the stream reads nothing (HTTP/2
// flow control holds the client back); a queue over the bound for `limits.overflow_deadline` ends
// the stream with RESOURCE_EXHAUSTED (StreamWriter). The coordinator keeps the rank's pending
// directives: its next attach gets them.
#ifndef PSYNC_SERVER_RPC_SESSION_STREAM_H_
#define PSYNC_SERVER_RPC_SESSION_STREAM_H_

#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "serve/stream_writer.h"
#include "server/owner/coordinator.h"
#include "wire/session_up_frame.h"

namespace psync::server {

// Creates the reactor for one Session call (served as session_up_frame.h's NewSessionHandler says).
wire::SessionReactor* NewSessionStream(Coordinator* coordinator, const serve::StreamLimits& limits);

}  // namespace psync::server

#endif  // PSYNC_SERVER_RPC_SESSION_STREAM_H_
