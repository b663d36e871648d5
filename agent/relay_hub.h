// RelayHub: a node agent relaying other node agents' AgentSessions (a relay tier: node agents ->
// relay -> coordinator). The hub holds ONE AgentSession stream to the coordinator for every
// downstream agent that connects, and passes each downstream AgentUp up and each answer and notice
// down, renumbered: the relay decides nothing, the coordinator still applies and answers every
// rank's message as that rank (exactly once, no early release, per-rank missing lists and audit).
//
// Up (from a downstream agent, in the order it sent them; written in that order):
//  * attach: forwarded with a request id of the hub's; the coordinator's AgentAck (status and
//    redirect) goes back under the agent's own id. The rank's notices go to the agent whose attach
//    of it is the newest.
//  * detach: forwarded (naming the hub's attach), answered at once; a detach of an attach the hub
//    does not know (never attached, or already superseded or refused) changes nothing.
//  * batch: a message of a rank not attached through that downstream stream is refused by the
//    relay with the coordinator's FAILED_PRECONDITION and left out (agent/batch_parts.h); the
//    rest goes up. Well-formed batches (wire/agent_batch_shape.h, the coordinator's own check) of
//    the same job and generation queued together (within flush_window of the oldest, when set)
//    go up as ONE AgentBatch, their messages concatenated (at most kMaxAgentBatchMessages and
//    max_batch_bytes), lazy when every part is;
//    a malformed one goes up alone, for the coordinator to refuse naming the field. The
//    coordinator's answer comes back split by part, with the message indices of each agent's own
//    batch; a part accepted whole whose agent sent it lazily is answered by acked_through, as the
//    coordinator does (serve/agent_down_queue.h), or by an AgentAck when its merged batch was not
//    lazy.
//  * anything else: INVALID_ARGUMENT, as the coordinator answers it.
// Down: the coordinator's answers (in request order), then its notices, split by downstream agent
// (one AgentNotice per agent for what was one for the relay), then its closures
// (AgentRankClosed, under the agent's attach id), each agent's share added to its queue at once,
// on one of options.fanout_threads (so that a release's writes to many agents go out side by
// side); every answer the relay gives an agent of its own goes through the same thread, so an
// agent gets its shares and answers in the order the hub made them.
//
// Failures. The stream to the coordinator reconnects with backoff (client/reconnecting_stream.h,
// as a node agent's own Upstream): every attach is sent again, then every batch not answered
// (same request id: the coordinator answers a repeat with the decision already made); detaches
// not yet written are dropped (the coordinator detached every rank of the ended stream); an
// attach the coordinator refuses on the new stream ends that rank's downstream attachment with an
// AgentRankClosed UNAVAILABLE (its agent ends the rank's Session, the rank joins again). The
// downstream agents' streams stay up meanwhile. A downstream stream that ends detaches its ranks
// upstream, so the coordinator's liveness sees them go as if the agent's own stream had ended.
//
// Replicas. A hub carries the jobs its relay's Router (agent/router.h) sends to one replica. An
// attach the replica refuses with UNAVAILABLE, or a rank it closes with UNAVAILABLE (it does not
// serve the job now), is reported through on_not_served with the owner its OwnerRedirect names,
// so the relay moves the job; the refusal or closure goes down without the redirect, so the
// downstream agent stays behind the relay and its rank joins again through it (a Join the relay
// forwards follows the redirect, agent/agent_service.h). With leave_when_unreachable, a replica
// that cannot be reached again (a stream that got no answer after one that broke) has every
// attachment ended downstream with UNAVAILABLE (AgentRankClosed, or the AgentAck of an attach not
// answered yet), on_not_served called for their jobs, and what was queued or unanswered dropped:
// those ranks' clients send it again after joining again. The one exception is a batch part with
// messages the relay refused itself (ranks not attached through that stream), which is answered
// whole with UNAVAILABLE, since nothing else would answer those ranks.
//
// Thread-safety: thread-safe; Connect/Receive/Disconnect only queue and never block on I/O, so
// reactors call them. Ownership: owns its ReconnectingStream (two threads); shares the channel;
// borrows the counters, which must outlive it.
#ifndef PSYNC_AGENT_RELAY_HUB_H_
#define PSYNC_AGENT_RELAY_HUB_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "agent/fanout_pool.h"
#include "agent/relayed_agent.h"
#include "agent/stats.h"
#include "client/backoff.h"
#include "client/reconnecting_stream.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "serve/job_rank_map.h"

namespace psync::agent {

struct RelayHubOptions {
  // The coordinator's channel. Required.
  std::shared_ptr<grpc::Channel> channel;
  // The coordinator's address, for messages.
  std::string target;
  BackoffOptions backoff;
  // A merged AgentBatch's bound (the coordinator accepts 1 MiB messages by default).
  size_t max_batch_bytes = 512 << 10;
  // How long queued batches may wait for more to merge with, after the oldest arrived: the
  // coordinator reads fewer, larger messages, each check-in waiting up to this much longer. An
  // attach or detach queued behind them, or a merged batch's worth of messages, sends them at
  // once. 0: sent as soon as the stream is free (merging only what queued meanwhile). psync-agent
  // passes its --relay_flush_window, 2 ms by default (AgentOptions::relay_flush_window).
  absl::Duration flush_window = absl::ZeroDuration();
  // Threads that write each downstream agent's share of a coordinator message
  // (agent/fanout_pool.h), an agent's shares in order; 0: the thread reading the coordinator's
  // stream writes them all. psync-agent passes its --relay_fanout_threads.
  size_t fanout_threads = 0;
  // Several replicas: a replica that cannot be reached again gives up its attachments (see
  // "Replicas" above). False (one coordinator, or one address in front of replicas): re-attach
  // forever.
  bool leave_when_unreachable = false;
  // Called (on the reader thread, holding only the hub's delivery turn: it must not call into
  // the hub) with the job of a rank whose attach the coordinator refused or ended with
  // UNAVAILABLE, and the owner its OwnerRedirect names (empty: none), and for each job given up
  // with an unreachable replica (no owner). May be empty.
  std::function<void(const std::string& job_id, const std::string& owner)> on_not_served;
};

class RelayHub final : private StreamProtocol<v1::AgentUp, v1::AgentDown> {
 public:
  RelayHub(RelayHubOptions options, AgentCounters* counters);
  ~RelayHub() override;
  RelayHub(const RelayHub&) = delete;
  RelayHub& operator=(const RelayHub&) = delete;

  // Cancels the upstream stream and joins its threads. Idempotent.
  void Shutdown();

  // A downstream agent's stream sends through this hub (starts the upstream stream on first use).
  void Connect(const std::shared_ptr<RelayedAgent>& agent) ABSL_LOCKS_EXCLUDED(mu_);
  // One AgentUp read from `agent`'s stream. Its batch may be moved out (*up is reused for the next
  // read).
  void Receive(const std::shared_ptr<RelayedAgent>& agent, v1::AgentUp* up)
      ABSL_LOCKS_EXCLUDED(mu_);
  // `agent`'s stream ended: its ranks are detached upstream. Idempotent.
  void Disconnect(RelayedAgent* agent) ABSL_LOCKS_EXCLUDED(mu_);

  // True while the upstream stream is open (it may still be connecting).
  bool connected() const;

 private:
  // One downstream attach the hub knows.
  struct Attachment {
    RelayedAgent* agent = nullptr;  // a key of downstream_
    uint64_t downstream_id = 0;     // the agent's request id of the attach
    v1::Attach attach;
    uint64_t upstream_id = 0;  // the hub's request id on the current stream; 0: not written yet
    bool answered = false;     // the downstream attach was answered
  };
  // One downstream agent's stream.
  struct Downstream {
    std::weak_ptr<RelayedAgent> agent;
    absl::flat_hash_map<uint64_t, uint64_t> by_attach_id;  // downstream attach id -> handle
    serve::JobRankMap<uint64_t> by_rank;                   // newest attach of (job, rank)
  };
  // Something waiting to be written up.
  struct Queued {
    enum class Kind { kAttach, kDetach, kBatch };
    Kind kind = Kind::kBatch;
    uint64_t handle = 0;     // kAttach
    v1::AgentUp up;          // kDetach, kBatch (request id set when written)
    bool mergeable = false;  // kBatch: well formed, may share an AgentBatch with others
    size_t bytes = 0;        // kBatch: the batch's size
    absl::Time at;           // kBatch: when it arrived
    // kBatch: whose it is.
    struct Part {
      std::weak_ptr<RelayedAgent> agent;
      uint64_t downstream_id = 0;
      bool lazy = false;   // the agent sent it with lazy_ack
      uint32_t count = 0;  // its messages there
      // Message i of it up is message index_of[i] of the agent's batch; empty: the same.
      std::vector<uint32_t> index_of;
      std::vector<v1::MessageStatus> refused;  // the agent's messages the relay refused
    };
    Part part;
  };
  // A written AgentUp waiting for its AgentAck.
  struct AwaitingAck {
    Queued::Kind kind = Queued::Kind::kBatch;
    bool lazy = false;
    std::vector<Queued::Part> parts;  // kBatch, in the order their messages went up
  };
  // What goes down to one agent from one upstream message, in order.
  struct AgentShare {
    std::shared_ptr<RelayedAgent> agent;
    // Answers in request order: an AgentAck, or (lazy) a batch accepted whole, answered by
    // acked_through (only the ack's request_id is set).
    std::vector<std::pair<bool, v1::AgentAck>> answers;
    std::vector<v1::AgentNotice> notices;
    std::vector<v1::AgentRankClosed> closed;
  };
  // The shares of one upstream message (or of a replica given up), by agent, in the order of each
  // agent's first share.
  struct Deliveries {
    absl::flat_hash_map<RelayedAgent*, AgentShare> shares;
    std::vector<RelayedAgent*> order;
  };

  // StreamProtocol.
  absl::Status Prepare(bool* retry) override;
  std::vector<v1::AgentUp> OnOpen(bool* handshake) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnRead(const v1::AgentDown& down) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status OnClosed(const StreamEnd& end, bool* retry) override;
  absl::Time Produce(absl::Time now) override ABSL_LOCKS_EXCLUDED(mu_);
  // Asks the writer to look at the queue (Produce), counted in upstream_wake_requests.
  void WakeWriter();
  void OnWrite(const v1::AgentUp& up) override;
  // flush_window: until when the queued batches wait for more (InfinitePast: send them now).
  absl::Time HeldUntilLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // leave_when_unreachable: ends every attachment downstream with UNAVAILABLE and drops what was
  // queued or unanswered (see "Replicas"). Returns the jobs left, each once.
  std::vector<std::string> LeaveAllLocked(Deliveries* deliveries)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the refusal or closure of a rank's attach with UNAVAILABLE to `not_served` (job, owner)
  // and takes the redirect out of what goes down (the downstream agent stays behind the relay).
  template <typename Answer>
  static void NotServedBelow(const std::string& job_id, Answer* down,
                             std::vector<std::pair<std::string, std::string>>* not_served);

  void ReceiveAttach(const std::shared_ptr<RelayedAgent>& agent, uint64_t request_id,
                     const v1::Attach& attach) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReceiveDetach(RelayedAgent* agent, const v1::AgentDetach& detach)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the batch up; false when none of its messages may go up: *answer_now is its answer.
  bool ReceiveBatch(const std::shared_ptr<RelayedAgent>& agent, v1::AgentUp* up,
                    v1::AgentAck* answer_now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets an attachment; queues its upstream detach when it was written.
  void ForgetLocked(uint64_t handle, bool detach_upstream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::AgentUp AttachUpLocked(uint64_t handle, Attachment& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `run` (queued batches, mergeable ones of one job and generation, or one batch) as one
  // AgentBatch.
  void SendBatchLocked(std::vector<Queued>* run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The answers of the parts of one batch answered by `ack` (null: acked_through, accepted whole).
  void AnswerPartsLocked(const AwaitingAck& batch, const v1::AgentAck* ack, Deliveries* deliveries)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands each agent's share to the fan-out threads; `timed_fanout`: observed in fanout_agents
  // (from `read_at` to the last share queued).
  void Deliver(Deliveries deliveries, absl::Time read_at, bool timed_fanout);
  // Adds one agent's share to its queue (on a fan-out thread).
  static void WriteShare(AgentShare& share);
  // Where `agent`'s share of the upstream message being handled goes.
  static AgentShare& ShareFor(Deliveries* deliveries, const std::shared_ptr<RelayedAgent>& agent);

  const RelayHubOptions options_;
  AgentCounters* const counters_;
  const std::unique_ptr<v1::Coordinator::Stub> stub_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool answered_once_ ABSL_GUARDED_BY(mu_) = false;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  // leave_when_unreachable: the last stream got no answer (the replica is unreachable).
  bool unreachable_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_request_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Attachment> attachments_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<RelayedAgent*, Downstream> downstream_ ABSL_GUARDED_BY(mu_);
  // Where notices of (job, rank) go: the newest attachment, and its agent.
  struct Route {
    uint64_t handle = 0;
    RelayedAgent* agent = nullptr;  // a key of downstream_
  };
  serve::JobRankMap<Route> routes_ ABSL_GUARDED_BY(mu_);
  // Upstream attach request id (current stream) -> handle.
  absl::flat_hash_map<uint64_t, uint64_t> by_upstream_id_ ABSL_GUARDED_BY(mu_);
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, AwaitingAck> awaiting_ack_ ABSL_GUARDED_BY(mu_);

  // Held from before mu_ is released until the shares decided under it are handed to fanout_, so
  // that each agent gets them in the order they were decided: a rank's closure before the
  // relay's refusal of its next message, which that closure explains.
  absl::Mutex deliver_mu_ ABSL_ACQUIRED_AFTER(mu_);

  // Writes the agents' shares; destroyed after stream_, whose reader hands them over.
  FanoutPool fanout_;
  // Last: destroyed (its threads joined) first.
  std::unique_ptr<ReconnectingStream<v1::AgentUp, v1::AgentDown>> stream_;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_RELAY_HUB_H_
