// LocalRank: the agent's end of one local rank's Session, shared by the Session's reactor and the
// upstream link. The upstream answers the rank through it (the attach's result; an Ack per
// message with the coordinator's status for that message, except that a message the rank sent
// with lazy_ack and the coordinator accepted is answered by a later message's acked_through, as
// the coordinator answers a direct Session) and hands it the rank's notices;
// directives the rank already received on this Session (re-sent by the coordinator after the
// agent reconnected) are dropped, so the rank sees each directive once.
//
// Writes to the local stream through a server::SessionWriter (one message at a time, never
// blocking). Thread-safe. Outlives the reactor: once the stream is done (DetachReactor),
// everything is dropped.
#ifndef PSYNC_AGENT_LOCAL_RANK_H_
#define PSYNC_AGENT_LOCAL_RANK_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "agent/stats.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "serve/session_writer.h"

namespace psync::agent {

class LocalRank {
 public:
  using Reactor = wire::SessionReactor;

  // Neither is owned; `counters` must outlive the link.
  LocalRank(Reactor* reactor, AgentCounters* counters) : counters_(counters), writer_(reactor) {
    writer_.SetWaitObserver(metrics::SecondsObserver(counters->down_wait_ranks));
    writer_.SetWriteObserver(metrics::SecondsObserver(counters->down_write_ranks));
  }
  LocalRank(const LocalRank&) = delete;
  LocalRank& operator=(const LocalRank&) = delete;

  // Set once by the reactor from the Session's attach, before the link is handed to the upstream.
  void SetAttach(const v1::Attach& attach, uint64_t request_id) {
    attach_ = attach;
    attach_request_id_ = request_id;
  }
  const v1::Attach& attach() const { return attach_; }
  const std::string& job_id() const { return attach_.job_id(); }
  uint32_t rank() const { return attach_.rank(); }
  uint64_t attach_request_id() const { return attach_request_id_; }

  // The coordinator's answer to the attach: OK acknowledges it; otherwise the Session ends with
  // `status`, as a refused attach ends a Session.
  void AttachResult(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // The Ack of the message with `request_id`.
  void Ack(uint64_t request_id, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // The message `request_id`, sent with lazy_ack, was accepted: answered by the acked_through of
  // the newest message queued, or of the next one (serve/lazy_acks.h); FlushLazyAcks queues a
  // message of its own when none came.
  void AckLater(uint64_t request_id);
  void FlushLazyAcks();
  // A directive, StepSkipped or Abort for this rank; a directive already sent is dropped.
  void Notice(const v1::SessionDown& notice) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the Session with `status` once what is queued is written.
  void Close(const grpc::Status& status);
  // The upstream forgot the rank and is ending its Session with UNAVAILABLE so that the rank joins
  // again (its replica is gone or does not serve the job): messages still arriving on the Session
  // are left unanswered, not refused (the client sends them again after it joined again).
  void MarkRejoining() { rejoining_.store(true); }
  bool rejoining() const { return rejoining_.load(); }

  // From the reactor.
  void WriteDone(bool ok);
  void DetachReactor();

 private:
  // (generation, step, chunk) of a directive.
  using DirectiveKey = std::tuple<uint64_t, uint64_t, uint32_t>;
  // Directives this far behind the newest step are forgotten.
  static constexpr uint64_t kDirectiveWindowSteps = 1024;

  void Enqueue(v1::SessionDown message);

  AgentCounters* const counters_;
  // Written once by SetAttach before the link is shared; read-only afterwards.
  v1::Attach attach_;
  uint64_t attach_request_id_ = 0;

  std::atomic<bool> rejoining_{false};
  serve::SessionWriter writer_;
  mutable absl::Mutex mu_;
  absl::btree_set<DirectiveKey> directives_ ABSL_GUARDED_BY(mu_);
  uint64_t newest_step_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_LOCAL_RANK_H_
