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
  void Push(v1::SessionDown message) { messages_.push_back(std::move(message)); }
  bool empty() const { return messages_.empty(); }
  size_t size() const { return messages_.size(); }
  void Clear() { messages_.clear(); }
  v1::SessionDown Take() {
    v1::SessionDown next = std::move(messages_.front());
    messages_.pop_front();
    return next;
  }

 private:
  std::deque<v1::SessionDown> messages_;
};

class SessionWriter : public StreamWriter<SessionUpFrame, v1::SessionDown, SessionDownQueue> {
 public:
  explicit SessionWriter(Reactor* reactor) : StreamWriter(reactor, "peer") {}

  // Queues `message`; dropped once the writer is closing or detached.
  void Enqueue(v1::SessionDown message) {
    Add([&](SessionDownQueue& fifo) { fifo.Push(std::move(message)); });
  }
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_SESSION_WRITER_H_
