// SessionWriter: the write side of one server-side psync.v1 Session stream (the coordinator's
// Session reactor, or a node agent's Session of a local rank): a StreamWriter (stream_writer.h,
// whose contract it has) over a FIFO of SessionDown messages, which also holds the stream's lazy
// acks (SessionUp.lazy_ack) until a message carries them.
//
// Thread-safe, as StreamWriter.
#ifndef PSYNC_SERVE_SESSION_WRITER_H_
#define PSYNC_SERVE_SESSION_WRITER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <utility>

#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "serve/lazy_acks.h"
#include "serve/stream_writer.h"
#include "wire/session_up_frame.h"

namespace psync::serve {

// The messages of one Session, written in the order queued, and its lazy acks
// (SessionUp.lazy_ack): an accepted lazy message is answered by SessionDown.acked_through as
// lazy_acks.h says (FlushLazyAcks queues a message of its own for an answer held).
class SessionDownQueue {
 public:
  void Push(v1::SessionDown message) {
    lazy_.CarryHeld(&message);
    const size_t bytes = QueuedBytes(message);
    messages_.push_back({std::move(message), bytes});
    bytes_ += bytes;
  }
  // The message `request_id` (lazy_ack) was accepted. Returns true when nothing queued could carry
  // it and no lazy ack was pending before: the caller arms a FlushLazyAcks for later.
  bool AckLater(uint64_t request_id) {
    return lazy_.Accept(request_id, messages_.empty() ? nullptr : &messages_.back().message);
  }
  // Queues a message of its own for the pending lazy acks, if any.
  void FlushLazyAcks() {
    if (lazy_.held()) Push(v1::SessionDown());
  }
  bool empty() const { return messages_.empty(); }
  size_t size() const { return messages_.size(); }
  // The sum of QueuedBytes over the queued messages.
  size_t bytes() const { return bytes_; }
  void Clear() {
    messages_.clear();
    bytes_ = 0;
    lazy_.Clear();
  }
  v1::SessionDown Take() {
    v1::SessionDown next = std::move(messages_.front().message);
    bytes_ -= messages_.front().bytes;
    messages_.pop_front();
    return next;
  }

 private:
  struct Queued {
    v1::SessionDown message;
    size_t bytes;
  };
  std::deque<Queued> messages_;
  size_t bytes_ = 0;
  LazyAcks lazy_;
};

class SessionWriter : public StreamWriter<wire::SessionUpFrame, v1::SessionDown, SessionDownQueue> {
 public:
  // Without limits the queue is unbounded (a node agent's local side).
  explicit SessionWriter(Reactor* reactor, StreamLimits limits = {}, Clock* clock = nullptr,
                         ArmTimer arm_timer = nullptr)
      : StreamWriter(reactor, "peer", limits, clock, std::move(arm_timer)) {}

  // Queues `message`; dropped once the writer is closing or detached.
  void Enqueue(v1::SessionDown message) {
    Add([&](SessionDownQueue& fifo) { fifo.Push(std::move(message)); });
  }
  // SessionDownQueue::AckLater under the writer's lock.
  bool AckLater(uint64_t request_id) {
    bool arm = false;
    Add([&](SessionDownQueue& fifo) { arm = fifo.AckLater(request_id); });
    return arm;
  }
  // SessionDownQueue::FlushLazyAcks under the writer's lock (and writes it).
  void FlushLazyAcks() {
    Add([](SessionDownQueue& fifo) { fifo.FlushLazyAcks(); });
  }
};

}  // namespace psync::serve

#endif  // PSYNC_SERVE_SESSION_WRITER_H_
