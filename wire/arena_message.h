// ArenaMessage: a protobuf message that a stream reads into again and again, allocated on an
// arena that is reset between messages, so that parsing a message with many repeated fields and
// strings costs one or two block allocations instead of one allocation per field. The arena's
// first block is owned here and kept across resets, so a message that fits in it costs no
// allocation at all. The first block starts at kInitialBlock bytes; when a message needed more,
// the next arena's first block holds as much (rounded up to a power of two, at most
// kLargestBlock), so that a stream whose messages are large (a relay's batches) parses its usual
// message without allocating either.
//
// Thread-safety: none; one reader at a time (a reactor's read reactions). Owns the message.
#ifndef PSYNC_WIRE_ARENA_MESSAGE_H_
#define PSYNC_WIRE_ARENA_MESSAGE_H_

#include <cstddef>
#include <memory>
#include <optional>

#include "google/protobuf/arena.h"

namespace psync::wire {

template <typename Message>
class ArenaMessage {
 public:
  static constexpr size_t kInitialBlock = 2048;
  static constexpr size_t kLargestBlock = size_t{256} << 10;

  ArenaMessage() { StartArena(kInitialBlock); }
  ArenaMessage(const ArenaMessage&) = delete;
  ArenaMessage& operator=(const ArenaMessage&) = delete;

  Message* get() { return message_; }
  const Message* get() const { return message_; }
  Message& operator*() { return *message_; }
  Message* operator->() { return message_; }

  // Frees the current message and everything parsed into it; returns a fresh empty one.
  Message* Renew() {
    const size_t used = static_cast<size_t>(arena_->SpaceAllocated());
    if (used > block_size_ && block_size_ < kLargestBlock) {
      size_t size = block_size_;
      while (size < used && size < kLargestBlock) size *= 2;
      StartArena(size);
    } else {
      arena_->Reset();
      message_ = google::protobuf::Arena::CreateMessage<Message>(&*arena_);
    }
    return message_;
  }

  // The size of the arena's first block (the most a message can take without allocating), and
  // what the arena holds now.
  size_t first_block_size() const { return block_size_; }
  size_t space_allocated() const { return static_cast<size_t>(arena_->SpaceAllocated()); }

 private:
  // A new arena whose first block is `size` bytes, and an empty message on it.
  void StartArena(size_t size) {
    arena_.reset();  // before its first block goes
    block_size_ = size;
    first_block_.reset(new char[size]);
    google::protobuf::ArenaOptions options;
    options.initial_block = first_block_.get();
    options.initial_block_size = size;
    arena_.emplace(options);
    message_ = google::protobuf::Arena::CreateMessage<Message>(&*arena_);
  }

  size_t block_size_ = 0;
  std::unique_ptr<char[]> first_block_;  // outlives arena_ (StartArena, and declared first)
  std::optional<google::protobuf::Arena> arena_;
  Message* message_ = nullptr;
};

}  // namespace psync::wire

#endif  // PSYNC_WIRE_ARENA_MESSAGE_H_
