// LazyAcks: the rule by which a stream's outbound queue answers messages accepted lazily
// (SessionUp.lazy_ack, AgentUp.lazy_ack) through its messages' `acked_through`, shared by the
// Session queue (session_writer.h) and the AgentSession queue (agent_down_queue.h).
//
// An accepted lazy request is written into the newest message queued when it was accepted, or,
// when nothing is queued, held until the next message is queued (or a flush queues one of its
// own). So a message never says more than what was decided before it was queued, and an answer
// queued earlier (a refusal's Ack) is never overtaken by an acked_through covering a later
// request.
//
// Thread-compatible: the owning queue serializes access. Works on any message type with
// `uint64 acked_through` (SessionDown, AgentDown).
#ifndef PSYNC_SERVE_LAZY_ACKS_H_
#define PSYNC_SERVE_LAZY_ACKS_H_

#include <algorithm>
#include <cstdint>

namespace psync::serve {

class LazyAcks {
 public:
  // Request `request_id` was accepted lazily; `newest` is the newest message still queued, or
  // null when none is. Returns true when nothing could carry it and no answer was held before:
  // the caller arms a flush for later.
  template <typename Message>
  bool Accept(uint64_t request_id, Message* newest) {
    if (newest != nullptr) {
      Raise(newest, request_id);
      return false;
    }
    const bool first = held_ == 0;
    held_ = std::max(held_, request_id);
    return first;
  }
  // `message` is being queued: it carries what is held.
  template <typename Message>
  void CarryHeld(Message* message) {
    if (held_ == 0) return;
    Raise(message, held_);
    held_ = 0;
  }
  // Whether an answer is held for the next message (a flush must queue one).
  bool held() const { return held_ != 0; }
  void Clear() { held_ = 0; }

 private:
  template <typename Message>
  static void Raise(Message* message, uint64_t through) {
    message->set_acked_through(std::max(message->acked_through(), through));
  }

  uint64_t held_ = 0;  // highest request accepted lazily with nothing queued; 0: none
};

}  // namespace psync::serve

#endif  // PSYNC_SERVE_LAZY_ACKS_H_
