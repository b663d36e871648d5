// SessionWriter: the write side of one server-side psync.v1 Session stream (the coordinator's
// Session reactor, or a node agent's Session of a local rank). Queues SessionDown messages and
// writes them one at a time; Close finishes the call once the queue is drained; a failed write
// (the peer is gone) drops what is queued and finishes the call as CANCELLED.
//
// Thread-safe: any thread may Enqueue or Close; the reactor calls WriteDone from OnWriteDone and
// Detach from OnDone. Never blocks on I/O and holds no lock across StartWrite or Finish. Does not
// own the reactor; after Detach everything is dropped, so the writer may outlive it.
#ifndef PSYNC_SERVER_SESSION_WRITER_H_
#define PSYNC_SERVER_SESSION_WRITER_H_

#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::server {

class SessionWriter {
 public:
  using Reactor = grpc::ServerBidiReactor<v1::SessionUp, v1::SessionDown>;

  explicit SessionWriter(Reactor* reactor) : reactor_(reactor) {}
  SessionWriter(const SessionWriter&) = delete;
  SessionWriter& operator=(const SessionWriter&) = delete;

  // Queues `message`; dropped once the writer is closing or detached.
  void Enqueue(v1::SessionDown message) ABSL_LOCKS_EXCLUDED(mu_);
  // Finishes the call with `status` once what is queued is written (the first Close wins).
  void Close(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // From the reactor's OnWriteDone.
  void WriteDone(bool ok) ABSL_LOCKS_EXCLUDED(mu_);
  // From the reactor's OnDone: nothing is written after this.
  void Detach() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  Reactor* reactor_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::SessionDown> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  // The message being written; touched only by the single writer (writing_ == true).
  v1::SessionDown current_;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_SESSION_WRITER_H_
