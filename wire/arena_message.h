// ArenaMessage: a protobuf message that a stream reads into again and again, allocated on an
// arena that is reset between messages, so that parsing a message with many repeated fields and
// strings costs one or two block allocations instead of one allocation per field. The arena's
// first block is owned here and kept across resets, so a message that fits in it (kInitialBlock
// bytes) costs no allocation at all.
//
// Thread-safety: none; one reader at a time (a reactor's read reactions). Owns the message.
#ifndef PSYNC_WIRE_ARENA_MESSAGE_H_
#define PSYNC_WIRE_ARENA_MESSAGE_H_

#include <cstddef>
#include <memory>

#include "google/protobuf/arena.h"

namespace psync::wire {

template <typename Message>
class ArenaMessage {
 public:
  static constexpr size_t kInitialBlock = 2048;

  ArenaMessage()
      : initial_block_(new char[kInitialBlock]),
        arena_(Options(initial_block_.get())),
        message_(google::protobuf::Arena::CreateMessage<Message>(&arena_)) {}
  ArenaMessage(const ArenaMessage&) = delete;
  ArenaMessage& operator=(const ArenaMessage&) = delete;

  Message* get() { return message_; }
  const Message* get() const { return message_; }
  Message& operator*() { return *message_; }
  Message* operator->() { return message_; }

  // Frees the current message and everything parsed into it; returns a fresh empty one.
  Message* Renew() {
    arena_.Reset();
    message_ = google::protobuf::Arena::CreateMessage<Message>(&arena_);
    return message_;
  }

 private:
  static google::protobuf::ArenaOptions Options(char* block) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = kInitialBlock;
    return options;
  }

  std::unique_ptr<char[]> initial_block_;  // declared before arena_: it outlives the arena
  google::protobuf::Arena arena_;
  Message* message_;
};

}  // namespace psync::wire

#endif  // PSYNC_WIRE_ARENA_MESSAGE_H_
