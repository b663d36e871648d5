// SessionUpFrame: one message as the server side of a psync.v1 Session reads it (the coordinator's
// SessionStream, a node agent's LocalSession): the SessionUp its bytes parse to, or the fact that
// they do not parse as one.
//
// Why not read SessionUp itself: gRPC's protobuf codec reports bytes that do not parse exactly as
// it reports the end of the client's writes (OnReadDone(false)), so such a Session ended with OK
// and its rank was silently detached. A frame's codec (the SerializationTraits below) keeps the
// parse result and always hands the frame to the reactor, which ends the Session with
// INVALID_ARGUMENT (session_protocol.h's DecideSessionFrame). The bytes on the wire are a
// SessionUp either way; clients are unchanged.
//
// NewSessionHandler makes the handler that serves a psync.v1.Coordinator service's Session method
// with frames; the service registers it in its constructor:
//   MarkMethodCallback(SessionMethodIndex(), NewSessionHandler(...));
//
// Thread-safety: none; one reader at a time (a reactor's read reactions). The message lives on the
// frame's arena (ArenaMessage), freed by Renew.
#ifndef PSYNC_WIRE_SESSION_UP_FRAME_H_
#define PSYNC_WIRE_SESSION_UP_FRAME_H_

#include <functional>

#include "grpcpp/grpcpp.h"
#include "grpcpp/support/server_callback.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "wire/arena_message.h"

namespace psync::wire {

class SessionUpFrame {
 public:
  // The message read; empty (and not to be used) when !parsed().
  v1::SessionUp& message() { return *message_; }
  const v1::SessionUp& message() const { return *message_.get(); }
  // False when the bytes read did not parse as a SessionUp.
  bool parsed() const { return parsed_; }

  // Frees the message read; returns this frame, empty, to read the next one into.
  SessionUpFrame* Renew() {
    message_.Renew();
    parsed_ = false;
    return this;
  }

  // The codec's side: parses `buffer` into the message. Never fails; records whether it parsed.
  void Parse(grpc::ByteBuffer* buffer);

 private:
  ArenaMessage<v1::SessionUp> message_;
  bool parsed_ = false;
};

using SessionReactor = grpc::ServerBidiReactor<SessionUpFrame, v1::SessionDown>;

// The index of the Session method in the psync.v1.Coordinator service (as grpc::Service numbers
// its methods: in the order of the proto's rpcs).
int SessionMethodIndex();

// A callback handler for the Session method whose reactors, made by `make`, read SessionUpFrames.
// The caller (a grpc::Service's constructor) owns it until it passes it to MarkMethodCallback.
grpc::internal::MethodHandler* NewSessionHandler(
    std::function<SessionReactor*(grpc::CallbackServerContext*)> make);

}  // namespace psync::wire

namespace grpc {

// The codec of a SessionUpFrame: reading never fails (see SessionUpFrame); writing one is the
// message's own encoding.
template <>
class SerializationTraits<psync::wire::SessionUpFrame, void> {
 public:
  static Status Serialize(const psync::wire::SessionUpFrame& frame, ByteBuffer* buffer,
                          bool* own_buffer) {
    return SerializationTraits<psync::v1::SessionUp>::Serialize(frame.message(), buffer,
                                                                own_buffer);
  }
  static Status Deserialize(ByteBuffer* buffer, psync::wire::SessionUpFrame* frame) {
    frame->Parse(buffer);
    return Status::OK;
  }
};

}  // namespace grpc

#endif  // PSYNC_WIRE_SESSION_UP_FRAME_H_
