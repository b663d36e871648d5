// StreamWriter: the write side of one server-side gRPC bidi stream. Queues what goes down, writes
// one message at a time, finishes the call once the queue is drained after Close, and on a failed
// write (the peer is gone) drops what is queued and finishes the call as CANCELLED. Used by the
// Session streams (SessionWriter, over a FIFO) and the node agents' AgentSession streams (over a
// merging queue, corked while one decision's notices are handed out).
//
// Queue: `bool empty()`, `size_t size()`, `void Clear()` and `Down Take()` (the next message to
// write). While corked, the newest queued message is held back (a merging queue may still add to
// it); older ones may leave.
//
// Thread-safe: any thread may Add, Cork/Uncork or Close; the reactor calls WriteDone from
// OnWriteDone and Detach from OnDone. Never blocks on I/O and holds no lock across StartWrite or
// Finish. Does not own the reactor; after Detach everything is dropped, so the writer may outlive
// it.
#ifndef PSYNC_SERVER_STREAM_WRITER_H_
#define PSYNC_SERVER_STREAM_WRITER_H_

#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"

namespace psync::server {

template <typename Up, typename Down, typename Queue>
class StreamWriter {
 public:
  using Reactor = grpc::ServerBidiReactor<Up, Down>;

  // `peer` names the other end in the status of a failed write ("write failed: <peer> gone").
  StreamWriter(Reactor* reactor, absl::string_view peer)
      : reactor_(reactor), write_failed_(absl::StrCat("write failed: ", peer, " gone")) {}
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Runs add(Queue&) under the lock, then starts a write if one may start. Nothing is added once
  // the writer is closing or detached.
  template <typename F>
  void Add(F&& add) ABSL_LOCKS_EXCLUDED(mu_) {
    Reactor* start = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || closing_) return;
      add(queue_);
      start = NextWriteLocked();
    }
    if (start != nullptr) start->StartWrite(&current_);
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
    grpc::Status finish_status;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr) return;
      writing_ = false;
      if (!ok) {
        queue_.Clear();
        if (!closing_) {
          closing_ = true;
          finish_status_ = grpc::Status(grpc::StatusCode::CANCELLED, write_failed_);
        }
      }
      start = NextWriteLocked();
      if (start == nullptr && closing_ && queue_.empty() && !finished_) {
        finished_ = true;
        finish = reactor_;
        finish_status = finish_status_;
      }
    }
    if (start != nullptr) start->StartWrite(&current_);
    if (finish != nullptr) finish->Finish(finish_status);
  }

  // From the reactor's OnDone: nothing is written after this.
  void Detach() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    reactor_ = nullptr;
    queue_.Clear();
  }

 private:
  // Takes the next message into current_ when a write may start now; returns the reactor to
  // start it on, or null.
  Reactor* NextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reactor_ == nullptr || writing_ || finished_ || queue_.empty()) return nullptr;
    if (corks_ > 0 && queue_.size() < 2) return nullptr;
    writing_ = true;
    current_ = queue_.Take();
    return reactor_;
  }

  absl::Mutex mu_;
  Reactor* reactor_ ABSL_GUARDED_BY(mu_);
  const std::string write_failed_;
  Queue queue_ ABSL_GUARDED_BY(mu_);
  int corks_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  // The message being written; touched only by the single writer (writing_ == true).
  Down current_;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_STREAM_WRITER_H_
