// StreamWriter: the write side of one server-side gRPC bidi stream. Queues what goes down, writes
// one message at a time, finishes the call once the queue is drained after Close, and on a failed
// write (the peer is gone) drops what is queued and finishes the call as CANCELLED. Used by the
// Session streams (SessionWriter, over a FIFO) and the node agents' AgentSession streams (over a
// merging queue, corked while one decision's notices are handed out).
//
// Queue: `bool empty()`, `size_t size()`, `size_t bytes()` (what the queued messages hold, about:
// see QueuedBytes), `void Clear()` and `Down Take()` (the next message to write). While corked, the
// newest queued message is held back (a merging queue may still add to it); older ones may leave.
//
// Flow control (StreamLimits). A peer that writes and never reads would make the queue of answers
// grow without bound. So once the queue holds more than `limits.queue_bytes`, the reactor stops
// reading (ReadAllowed() returns false; HTTP/2 flow control then pushes back on the peer) and the
// writer calls `resume_read` once the queue is back at or under the bound. A queue that stays over
// the bound for `limits.overflow_deadline` is dropped and the call finished at once with
// RESOURCE_EXHAUSTED (a message naming the bound); `on_overflow` (SetOnOverflow) then runs, so
// that the stream's owner lets go of what the stream held in the coordinator (a Session's rank is
// detached and its lease runs) without waiting for a peer that does not read to take the status
// from behind its flow-controlled data. The bound is a soft one: what the coordinator
// hands out (notices) is always queued, never dropped while the stream lives, and a read in
// progress completes; what stops is reading, i.e. new answers. Time comes from the injected Clock;
// the writer asks `arm_timer(after)` to call CheckOverflow() once `after` has passed (AlarmTimer
// below does it with a grpc::Alarm; tests call CheckOverflow by hand).
//
// Queue wait (SetWaitObserver, optional): as each message's write starts, the observer gets how
// long the oldest content it carries waited since it was queued (a merging queue's message is as
// old as the Add that opened it). Write time (SetWriteObserver, optional): as each write
// completes (WriteDone(true)), how long it took from its start: the transport taking the message,
// which waits while the peer's flow-control window is full. Both read from the Clock; they cost
// nothing when no observer is set.
//
// Thread-safe: any thread may Add, Cork/Uncork, Close or CheckOverflow; the reactor calls
// ReadAllowed from its read reaction, WriteDone from OnWriteDone and Detach from OnDone. Never
// blocks on I/O and holds no lock across StartWrite, Finish or the callbacks. Does not own the
// reactor; after Detach everything is dropped, so the writer may outlive it.
#ifndef PSYNC_SERVE_STREAM_WRITER_H_
#define PSYNC_SERVE_STREAM_WRITER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"
#include "serve/clock.h"
#include "wire/wire_status.h"

namespace psync::serve {

// What the bounds did, over all streams that share it. Thread-safe.
struct StreamCounters {
  std::atomic<uint64_t> reads_paused{0};  // a stream stopped reading (its queue over the bound)
  std::atomic<uint64_t> overflows{0};     // a stream ended with RESOURCE_EXHAUSTED
};

// The bounds of one stream's outbound queue (see the flow-control paragraph above).
struct StreamLimits {
  // Bytes queued past which the stream stops reading; 0: no bound.
  size_t queue_bytes = 0;
  // How long the queue may stay over `queue_bytes` before the stream is ended with
  // RESOURCE_EXHAUSTED.
  absl::Duration overflow_deadline = absl::InfiniteDuration();
  // A WatchEvents stream's bound: the bytes of matching events recorded while the watcher takes
  // none (a replay is paged from the event log as it reads; event_stream.h); 0: bounded by event
  // count only.
  size_t watch_queue_bytes = 0;
  // Not owned; may be null.
  StreamCounters* counters = nullptr;
  // Session and AgentSession streams: how long an accepted lazy_ack message (or batch) may wait
  // for a message to carry its answer (session_stream.h, agent_stream.h); zero: every message is
  // acked at once.
  absl::Duration lazy_ack_delay = absl::ZeroDuration();
  // AgentSession streams: called (under the stream's writer lock: keep it cheap) as each message's
  // write starts, with how long its oldest content waited in the stream's queue
  // (StreamWriter::SetWaitObserver); empty: not timed.
  std::function<void(absl::Duration waited)> agent_down_wait;
  // AgentSession streams: called (under the stream's writer lock: keep it cheap) as each write
  // completes, with how long it took (StreamWriter::SetWriteObserver); empty: not timed.
  std::function<void(absl::Duration took)> agent_down_write;
};

// What one queued message counts for against StreamLimits::queue_bytes: its serialized size plus
// what a queued message object costs besides (an Ack serializes to a dozen bytes but its objects
// take about ten times that).
inline constexpr size_t kQueuedMessageOverhead = 128;
template <typename Message>
size_t QueuedBytes(const Message& m) {
  return m.ByteSizeLong() + kQueuedMessageOverhead;
}

template <typename Up, typename Down, typename Queue>
class StreamWriter {
 public:
  using Reactor = grpc::ServerBidiReactor<Up, Down>;
  // Asks for one call of CheckOverflow() once `after` has passed.
  using ArmTimer = std::function<void(absl::Duration after)>;

  // `peer` names the other end in the status of a failed write ("write failed: <peer> gone").
  // Without limits the queue is unbounded and neither `clock` nor `arm_timer` is used.
  StreamWriter(Reactor* reactor, absl::string_view peer, StreamLimits limits = {},
               Clock* clock = nullptr, ArmTimer arm_timer = nullptr)
      : limits_(limits),
        clock_(clock != nullptr ? clock : &real_clock_),
        arm_timer_(std::move(arm_timer)),
        reactor_(reactor),
        write_failed_(absl::StrCat("write failed: ", peer, " gone")) {}
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Called (outside the writer's lock, from OnWriteDone) when reading may go on after
  // ReadAllowed() said no. Set before the first read.
  void SetResumeRead(std::function<void()> resume_read) { resume_read_ = std::move(resume_read); }
  // Called once (outside the writer's lock, from CheckOverflow) when the overflow deadline ended
  // the stream. Set before the first read.
  void SetOnOverflow(std::function<void()> on_overflow) { on_overflow_ = std::move(on_overflow); }
  // Called under the writer's lock (keep it cheap: a histogram's Observe) as each message's write
  // starts, with its oldest content's wait in the queue. Set before the first Add.
  void SetWaitObserver(std::function<void(absl::Duration waited)> observe) {
    observe_wait_ = std::move(observe);
  }

  // Called under the writer's lock (keep it cheap) as each write completes, with how long it took
  // from its start. Set before the first Add.
  void SetWriteObserver(std::function<void(absl::Duration took)> observe) {
    observe_write_ = std::move(observe);
  }

  // Runs add(Queue&) under the lock, then starts a write if one may start. Nothing is added once
  // the writer is closing or detached.
  template <typename F>
  void Add(F&& add) ABSL_LOCKS_EXCLUDED(mu_) {
    Reactor* start = nullptr;
    absl::Duration arm = absl::InfiniteDuration();
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || closing_) return;
      const size_t before = queue_.size();
      add(queue_);
      if (observe_wait_) {
        // The messages this Add opened are as old as now.
        const absl::Time now = clock_->Now();
        for (size_t n = before; n < queue_.size(); ++n) opened_.push_back(now);
      }
      start = NextWriteLocked();
      arm = NoteOverBoundLocked();
    }
    if (start != nullptr) start->StartWrite(&current_);
    if (arm != absl::InfiniteDuration()) arm_timer_(arm);
  }

  void Cork() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ++corks_;
  }
  void Uncork() ABSL_LOCKS_EXCLUDED(mu_) {
    Reactor* start = nullptr;
    {
      absl::MutexLock lock(&mu_);
      --corks_;
      start = NextWriteLocked();
    }
    if (start != nullptr) start->StartWrite(&current_);
  }

  // From the reactor's read reaction, once the message read was handled: whether it may start
  // its next read now. False while the queue is over the bound: resume_read is then called once it
  // drained (never when the stream is closing).
  bool ReadAllowed() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!OverBoundLocked()) return true;
    read_paused_ = true;
    if (limits_.counters != nullptr) limits_.counters->reads_paused.fetch_add(1);
    return false;
  }

  // Finishes the call with `status` once what is queued is written (the first Close wins).
  void Close(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    Reactor* finish = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || closing_) return;
      closing_ = true;
      finish_status_ = status;
      if (writing_ || !queue_.empty()) return;  // finished when the queue drains
      finished_ = true;
      finish = reactor_;
    }
    finish->Finish(status);
  }

  // From the reactor's OnWriteDone.
  void WriteDone(bool ok) ABSL_LOCKS_EXCLUDED(mu_) {
    Reactor* start = nullptr;
    Reactor* finish = nullptr;
    bool resume = false;
    grpc::Status finish_status;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr) return;
      writing_ = false;
      if (ok && observe_write_) observe_write_(clock_->Now() - write_started_);
      if (!ok) {
        ClearQueueLocked();
        if (!closing_) {
          closing_ = true;
          finish_status_ = grpc::Status(grpc::StatusCode::CANCELLED, write_failed_);
        }
      }
      start = NextWriteLocked();
      if (!OverBoundLocked()) {
        over_since_ = absl::InfiniteFuture();
        resume = read_paused_ && !closing_;
        read_paused_ = false;
      }
      if (start == nullptr && closing_ && queue_.empty() && !finished_) {
        finished_ = true;
        finish = reactor_;
        finish_status = finish_status_;
      }
    }
    if (start != nullptr) start->StartWrite(&current_);
    if (resume && resume_read_) resume_read_();
    if (finish != nullptr) finish->Finish(finish_status);
  }

  // From the timer armed through arm_timer: ends the stream with RESOURCE_EXHAUSTED when its
  // queue has been over the bound for the overflow deadline (what is queued is dropped; a write in
  // flight is left to complete or fail), or asks for another call when that time is still ahead.
  // Returns whether it ended the stream.
  bool CheckOverflow() ABSL_LOCKS_EXCLUDED(mu_) {
    Reactor* finish = nullptr;
    grpc::Status finish_status;
    absl::Duration arm = absl::InfiniteDuration();
    {
      absl::MutexLock lock(&mu_);
      timer_armed_ = false;
      if (reactor_ == nullptr || finished_ || over_since_ == absl::InfiniteFuture()) return false;
      const absl::Duration left = over_since_ + limits_.overflow_deadline - clock_->Now();
      if (left > absl::ZeroDuration()) {
        timer_armed_ = true;
        arm = left;
      } else {
        finish_status_ = grpc::Status(
            grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat(wire::kStreamOverflowMessage, limits_.queue_bytes, " bytes (",
                         queue_.bytes(), " queued) for ",
                         absl::FormatDuration(limits_.overflow_deadline),
                         ": the peer does not read what it is sent (--stream_queue_bytes, "
                         "--stream_overflow_deadline); re-attach to get what is pending"));
        ClearQueueLocked();
        closing_ = true;
        finished_ = true;
        read_paused_ = false;
        over_since_ = absl::InfiniteFuture();
        finish = reactor_;
        finish_status = finish_status_;
      }
    }
    if (arm != absl::InfiniteDuration()) arm_timer_(arm);
    if (finish == nullptr) return false;
    if (limits_.counters != nullptr) limits_.counters->overflows.fetch_add(1);
    if (on_overflow_) on_overflow_();
    finish->Finish(finish_status);
    return true;
  }

  // From the reactor's OnDone: nothing is written after this.
  void Detach() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    reactor_ = nullptr;
    ClearQueueLocked();
  }

  // What the queue holds now (for tests and status pages).
  size_t queued_bytes() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return queue_.bytes();
  }

 private:
  void ClearQueueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    queue_.Clear();
    opened_.clear();
  }

  bool OverBoundLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return limits_.queue_bytes > 0 && queue_.bytes() > limits_.queue_bytes;
  }

  // Records when the queue went over the bound; returns when to call CheckOverflow (infinite:
  // no timer to arm now).
  absl::Duration NoteOverBoundLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!OverBoundLocked() || over_since_ != absl::InfiniteFuture()) {
      return absl::InfiniteDuration();
    }
    over_since_ = clock_->Now();
    if (timer_armed_ || !arm_timer_ || limits_.overflow_deadline == absl::InfiniteDuration()) {
      return absl::InfiniteDuration();
    }
    timer_armed_ = true;
    return limits_.overflow_deadline;
  }

  // Takes the next message into current_ when a write may start now; returns the reactor to
  // start it on, or null.
  Reactor* NextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reactor_ == nullptr || writing_ || finished_ || queue_.empty()) return nullptr;
    if (corks_ > 0 && queue_.size() < 2) return nullptr;
    writing_ = true;
    current_ = queue_.Take();
    if (observe_wait_ && !opened_.empty()) {
      observe_wait_(clock_->Now() - opened_.front());
      opened_.pop_front();
    }
    if (observe_write_) write_started_ = clock_->Now();
    return reactor_;
  }

  // Constant after construction (resume_read_ and observe_wait_ once set, before the first read
  // and the first Add).
  const StreamLimits limits_;
  RealClock real_clock_;
  Clock* const clock_;
  const ArmTimer arm_timer_;
  std::function<void()> resume_read_;
  std::function<void()> on_overflow_;
  std::function<void(absl::Duration)> observe_wait_;
  std::function<void(absl::Duration)> observe_write_;

  // State below is protected by mu_.
  absl::Mutex mu_;
  Reactor* reactor_ ABSL_GUARDED_BY(mu_);
  const std::string write_failed_;
  Queue queue_ ABSL_GUARDED_BY(mu_);
  // With a wait observer: when each queued message was opened, oldest first.
  std::deque<absl::Time> opened_ ABSL_GUARDED_BY(mu_);
  int corks_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time write_started_ ABSL_GUARDED_BY(mu_);  // with a write observer: the current write began
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool timer_armed_ ABSL_GUARDED_BY(mu_) = false;
  // When the queue last went over the bound; InfiniteFuture while at or under it.
  absl::Time over_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  // The message being written; touched only by the single writer (writing_ == true).
  Down current_;
};

// Calls fn(*owner) on a gRPC thread once `after` has passed (a grpc::Alarm), unless `owner` (held
// weakly) is gone by then.
template <typename Owner, typename Fn>
void RunAfter(absl::Duration after, std::weak_ptr<Owner> owner, Fn fn) {
  auto* alarm = new grpc::Alarm();  // deleted by its callback, which runs exactly once
  alarm->Set(absl::ToChronoTime(absl::Now() + after),
             [alarm, owner = std::move(owner), fn = std::move(fn)](bool fired) {
               if (fired) {
                 if (std::shared_ptr<Owner> o = owner.lock()) fn(*o);
               }
               delete alarm;
             });
}

// An ArmTimer for a writer owned by `owner` (held weakly): calls writer(owner).CheckOverflow()
// once `after` has passed, unless the owner is gone by then.
template <typename Owner, typename GetWriter>
std::function<void(absl::Duration)> AlarmTimer(std::weak_ptr<Owner> owner, GetWriter writer) {
  return [owner = std::move(owner), writer](absl::Duration after) {
    RunAfter(after, owner, [writer](Owner& o) { writer(o).CheckOverflow(); });
  };
}

}  // namespace psync::serve

#endif  // PSYNC_SERVE_STREAM_WRITER_H_
