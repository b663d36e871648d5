// Upstream: a node agent's AgentSession stream to one coordinator (or one coordinator replica:
// agent/router.h keeps one Upstream per replica it uses), carrying the Sessions of the node's
// ranks whose jobs go there (see agent/README.md).
//
// What it does.
//  * Attach: forwards a local rank's attach (the rank's own job, rank, generation, session id);
//    the coordinator's answer goes back to the rank. Notices for the rank are routed to its newest
//    local Session from then on.
//  * Submit: queues a local rank's staged / skip / sync_done message. A writer thread merges what
//    is queued into AgentBatches (agent/merge.h; one batch per run of messages of the same job and
//    generation, capped by max_batch_messages and max_batch_bytes) and writes them. With
//    flush_window 0 the writer takes whatever is queued as soon as it is free (no added latency
//    when idle; merging happens under load); otherwise it waits up to flush_window after the
//    oldest queued message, or until flush_messages are queued, or until a queued check-in
//    completes a (step, chunk) on this node (every local rank that declared the chunk in the Join
//    the agent forwarded has checked in with each of its optimizers: agent/local_completion.h)
//    or is one the agent cannot count (a rank whose Join it did not see), or a skip vote is
//    queued, so the window never delays the check-in a release waits for. Attach and detach are
//    written at once, in order with the messages around them. Each message's Ack carries the
//    coordinator's status for that message.
//  * Detach: a local Session ended; the rank is detached upstream so the coordinator's liveness
//    sees it go.
//  * Notices (AgentNotice: one notice, several ranks) are fanned out to the local Sessions; a
//    closure (a newer Session superseded the rank) ends the rank's local Session with its status.
//
// Reconnect (client/reconnecting_stream.h, shared with psync::Client). When the stream breaks, it
// is opened again after a backoff delay (client/backoff.h); every local rank it had attached is
// re-attached (with the same attach), then every batch not acknowledged is written again (same
// request id: the coordinator answers an identical repeat with the decision already made), then
// what was queued meanwhile. Directives the coordinator re-sends on re-attach are dropped by each
// LocalRank when already delivered; StepSkipped notices it re-sends reach the rank's client, which
// drops those it already has. A re-attach the coordinator refuses ends that rank's local Session
// with UNAVAILABLE, so its client joins again; a refusal of the rank's messages that comes with or
// after it (the coordinator, or a relay, no longer has the rank attached) is not passed on: the
// client sends them again on its next Session. Detaches not yet written when the stream broke are
// dropped (the coordinator detached every rank of the ended stream). The upstream never gives up;
// Shutdown() stops it. With leave_when_unreachable (an agent given several replicas), a replica
// that cannot be reached again has its ranks' local Sessions ended with UNAVAILABLE instead (see
// UpstreamOptions; a message such a rank sends meanwhile gets no Ack: its client sends it again
// after joining again), and refusals with UNAVAILABLE are reported through on_not_served, so the
// agent moves the job to another replica (agent/router.h); while such a replica stays unreachable
// and no local rank needs it, new streams to it wait for the backoff's growing delay (up to its
// maximum, which is then also the longest a new attach there waits to be written).
//
// Thread-safety: all methods are thread-safe and never block on I/O (Attach, Submit, Detach only
// queue), so reactors may call them. LocalRank callbacks run on the stream's reader thread
// without locks held. Ownership: owns its ReconnectingStream (two threads); shares the channel.
#ifndef PSYNC_AGENT_UPSTREAM_H_
#define PSYNC_AGENT_UPSTREAM_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/local_completion.h"
#include "agent/local_rank.h"
#include "agent/merge.h"
#include "agent/stats.h"
#include "client/backoff.h"
#include "client/reconnecting_stream.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "serve/job_rank_map.h"

namespace psync::agent {

struct UpstreamOptions {
  // The coordinator's channel. Required.
  std::shared_ptr<grpc::Channel> channel;
  // The replica's address, for messages.
  std::string target;
  // Several replicas (agent/router.h): when a stream breaks and the next one gets no answer
  // either (the replica is gone), every attached local Session ends with UNAVAILABLE and is
  // forgotten, what was queued or unacknowledged is dropped, and on_not_served runs for each of
  // their jobs; the ranks join again through the agent, at another replica. The stream itself
  // keeps retrying for later attaches. False (one coordinator): re-attach forever.
  bool leave_when_unreachable = false;
  // Called (on the reader thread, no lock held) with the job of a rank whose attach the
  // coordinator refused or ended with UNAVAILABLE (it does not serve the job now), with the owner
  // its OwnerRedirect names (empty: none named), and for each job of the ranks left when the
  // replica was unreachable (no owner). May be empty.
  std::function<void(const std::string& job_id, const std::string& owner)> on_not_served;
  BackoffOptions backoff;
  absl::Duration flush_window = absl::Milliseconds(20);
  size_t flush_messages = 1024;
  size_t max_batch_messages = 1024;
  size_t max_batch_bytes = 512 << 10;
  MergeOptions merge;  // how the batches are merged (agent/merge.h)
};

class Upstream final : private StreamProtocol<v1::AgentUp, v1::AgentDown> {
 public:
  // `counters` is not owned and must outlive the upstream. Requires options.channel.
  Upstream(UpstreamOptions options, AgentCounters* counters);
  ~Upstream() override;
  Upstream(const Upstream&) = delete;
  Upstream& operator=(const Upstream&) = delete;

  // Starts the stream's threads (connects). Once; later calls do nothing. True when this call
  // started them.
  bool Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels the stream and joins its threads. Idempotent.
  void Shutdown();

  // `link` carries its attach (LocalRank::SetAttach) already.
  void Attach(std::shared_ptr<LocalRank> link) ABSL_LOCKS_EXCLUDED(mu_);
  // `up` is a staged, skip or sync_done message of `link`'s rank.
  void Submit(const std::shared_ptr<LocalRank>& link, v1::SessionUp up) ABSL_LOCKS_EXCLUDED(mu_);
  // Idempotent; a link never attached is ignored.
  void Detach(const std::shared_ptr<LocalRank>& link) ABSL_LOCKS_EXCLUDED(mu_);
  // A local rank joined with `join` (forwarded by the agent): its declared chunks, for the
  // completion flush.
  void Declare(const v1::JoinRequest& join) ABSL_LOCKS_EXCLUDED(mu_);

  // True while a stream is open (from the moment it is opened: it may still fail to connect).
  bool connected() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One local Session known upstream.
  struct AttachedRank {
    std::shared_ptr<LocalRank> link;
    uint64_t attach_id = 0;  // request id of its attach on the current stream; 0: not written yet
    bool answered = false;   // the local attach was answered
  };
  // Something waiting to be written.
  struct Queued {
    enum class Kind { kAttach, kDetach, kMessage };
    Kind kind = Kind::kMessage;
    std::shared_ptr<LocalRank> link;  // kAttach, kMessage
    v1::SessionUp up;                 // kMessage
    v1::AgentDetach detach;           // kDetach
    size_t bytes = 0;
    absl::Time at;
  };
  // A written AgentUp waiting for its AgentAck.
  struct AwaitingAck {
    enum class Kind { kAttach, kDetach, kBatch };
    Kind kind = Kind::kBatch;
    bool lazy = false;  // kBatch sent with lazy_ack: AgentDown.acked_through may answer it
    // kBatch: per message of the batch, its local Session, request id and whether the rank sent
    // it with lazy_ack (accepted, it is answered by acked_through, not an Ack of its own).
    struct Origin {
      std::weak_ptr<LocalRank> link;
      uint64_t request_id = 0;
      bool lazy = false;
    };
    std::vector<Origin> origins;
  };

  // StreamProtocol: a new stream re-attaches what was attached; what is due is merged and sent.
  absl::Status Prepare(bool* retry) override;
  std::vector<v1::AgentUp> OnOpen(bool* handshake) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnRead(const v1::AgentDown& down) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status OnClosed(const StreamEnd& end, bool* retry) override;
  absl::Time Produce(absl::Time now) override ABSL_LOCKS_EXCLUDED(mu_);
  // Asks the writer to look at the queue (Produce), counted in upstream_wake_requests.
  void WakeWriter();
  void OnWrite(const v1::AgentUp& up) override;

  // Whether queued work is due now (or at *deadline).
  bool DueLocked(absl::Time now, absl::Time* deadline) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends every queued item as AgentUps (registering them as pending).
  void BuildLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attach of `link` on the current stream.
  v1::AgentUp AttachUpLocked(AttachedRank& link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets `link` (routes, attach id); points the route of its rank at another attached local
  // Session of the rank if there is one.
  void ForgetLocked(LocalRank* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // leave_when_unreachable: forgets every local Session (returned, to be closed), everything
  // queued and every unacknowledged batch.
  std::vector<std::shared_ptr<LocalRank>> LeaveAllLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const UpstreamOptions options_;
  AgentCounters* const counters_;
  const std::unique_ptr<v1::Coordinator::Stub> stub_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;       // the current stream got an answer
  bool answered_once_ ABSL_GUARDED_BY(mu_) = false;  // some stream got an answer
  // leave_when_unreachable: the last stream ended with no answer (Prepare holds back new streams
  // while no local rank needs one).
  bool unreachable_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_request_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<LocalRank*, AttachedRank> links_ ABSL_GUARDED_BY(mu_);
  // The local Session notices of (job, rank) go to: the newest attached (or attaching) one.
  serve::JobRankMap<LocalRank*> routes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, LocalRank*> attach_ids_ ABSL_GUARDED_BY(mu_);
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_messages_ ABSL_GUARDED_BY(mu_) = 0;
  LocalCompletion completion_ ABSL_GUARDED_BY(mu_);
  // A queued message is not to wait for the window: a check-in that completes a chunk on this node
  // or that LocalCompletion cannot count, or a skip vote.
  bool write_now_ ABSL_GUARDED_BY(mu_) = false;
  size_t queued_controls_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, AwaitingAck> awaiting_ack_ ABSL_GUARDED_BY(mu_);

  // Last: destroyed (its threads joined) first.
  std::unique_ptr<ReconnectingStream<v1::AgentUp, v1::AgentDown>> stream_;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_UPSTREAM_H_
