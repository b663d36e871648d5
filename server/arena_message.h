// ArenaMessage: a protobuf message that a stream reads into again and again, allocated on an
// arena that is reset between messages, so that parsing a message with many repeated fields and
// strings costs one or two block allocations instead of one allocation per field.
//
// Thread-safety: none; one reader at a time (a reactor's read reactions). Owns the message.
#ifndef PSYNC_SERVER_ARENA_MESSAGE_H_
#define PSYNC_SERVER_ARENA_MESSAGE_H_

#include "google/protobuf/arena.h"

namespace psync::server {

template <typename Message>
class ArenaMessage {
 public:
  ArenaMessage() : message_(google::protobuf::Arena::CreateMessage<Message>(&arena_)) {}
  ArenaMessage(const ArenaMessage&) = delete;
  ArenaMessage& operator=(const ArenaMessage&) = delete;

  Message* get() { return message_; }
  Message& operator*() { return *message_; }
  Message* operator->() { return message_; }

  // Frees the current message and everything parsed into it; returns a fresh empty one.
  Message* Renew() {
    arena_.Reset();
    message_ = google::protobuf::Arena::CreateMessage<Message>(&arena_);
    return message_;
  }

 private:
  google::protobuf::Arena arena_;
  Message* message_;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_ARENA_MESSAGE_H_
