// SessionWriter: the write side of one server-side psync.v1 Session stream (the coordinator's
// Session reactor, or a node agent's Session of a local rank): a StreamWriter (stream_writer.h,
// whose contract it has) over a FIFO of SessionDown messages.
//
// Thread-safe, as StreamWriter.
#ifndef PSYNC_SERVER_SESSION_WRITER_H_
#define PSYNC_SERVER_SESSION_WRITER_H_

#include <deque>
#include <utility>

#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "server/session_up_frame.h"
#include "server/stream_writer.h"

namespace psync::server {

// The messages of one Session, written in the order queued.
class SessionDownQueue {
 public:
  void Push(v1::SessionDown message) {
    const size_t bytes = QueuedBytes(message);
    messages_.push_back({std::move(message), bytes});
    bytes_ += bytes;
  }
  bool empty() const { return messages_.empty(); }
  size_t size() const { return messages_.size(); }
  // The sum of QueuedBytes over the queued messages.
  size_t bytes() const { return bytes_; }
  void Clear() {
    messages_.clear();
    bytes_ = 0;
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
};

class SessionWriter : public StreamWriter<SessionUpFrame, v1::SessionDown, SessionDownQueue> {
 public:
  // Without limits the queue is unbounded (a node agent's local side).
  explicit SessionWriter(Reactor* reactor, StreamLimits limits = {}, Clock* clock = nullptr,
                         ArmTimer arm_timer = nullptr)
      : StreamWriter(reactor, "peer", limits, clock, std::move(arm_timer)) {}

  // Queues `message`; dropped once the writer is closing or detached.
  void Enqueue(v1::SessionDown message) {
    Add([&](SessionDownQueue& fifo) { fifo.Push(std::move(message)); });
  }
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_SESSION_WRITER_H_
