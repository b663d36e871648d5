// Router: the coordinator replicas a node agent talks to, and which one each job goes to. It keeps
// one endpoint per replica address (a channel, a stub for forwarded calls, an Upstream, the
// AgentSession stream that carries the job's local Sessions, and a RelayHub, the stream that
// carries other node agents' ranks of the job when this agent relays), created on first use, and
// the jobs' routes (agent/job_routes.h: start entry by hash, redirects followed, rotation on
// failure).
//
//  * Forwarded calls (Join and the other unary calls) go to Route(job); FollowFailure() reads the
//    answer: an UNAVAILABLE carrying an OwnerRedirect (wire/wire_status.h) moves the job to the
//    named owner and asks for a retry there; an UNAVAILABLE without one (the replica is
//    unreachable), a redirect to nobody or a DEADLINE_EXCEEDED moves the job to the next list
//    entry. Other statuses change nothing.
//  * Local Sessions attach through UpstreamFor(job). An Upstream of a replica other than a single
//    listed target, whose stream cannot reconnect, ends its ranks' local Sessions with
//    UNAVAILABLE, and an attach the
//    coordinator refuses or ends with UNAVAILABLE (it does not serve the job) moves the job on:
//    the ranks join again through the agent and land on the job's owner.
//  * Relayed attaches go through RelayHubFor(job) (agent/relayed_routes.h), and move on as a local
//    Session's do: a hub reports the attaches its replica refuses or ends with UNAVAILABLE, and
//    the jobs of a replica that cannot be reached again (agent/relay_hub.h, "Replicas").
//  * With one target there is one listed endpoint, created at Start(), whose Upstream reconnects
//    forever, as a single coordinator expects; a job still follows a redirect to the owner it
//    names (a Service in front of replicas), and returns to the target when that owner fails.
//    With a fixed channel nothing moves.
//
// At most kMaxEndpoints endpoints exist (the list's and owners named by redirects; an owner that
// would exceed it is treated as "nobody"); they live until the router is destroyed, so pointers
// handed out stay valid. Jobs off their list entry are remembered (JobRoutes, bounded). Counts
// redirects and rotations in the agent's counters.
//
// Thread-safety: thread-safe; never blocks on I/O (an Upstream connects on its own threads).
// Upstream callbacks into the router run on the upstream's reader thread without its locks.
// Ownership: owns its endpoints; borrows the counters, which must outlive it.
#ifndef PSYNC_AGENT_ROUTER_H_
#define PSYNC_AGENT_ROUTER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "agent/job_routes.h"
#include "agent/relay_hub.h"
#include "agent/stats.h"
#include "agent/upstream.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::agent {

struct RouterOptions {
  // The replicas (not empty). One target: jobs follow redirects, and never leave it on a failure.
  std::vector<std::string> targets;
  // False with a fixed channel (AgentOptions::channel): an owner's address means nothing then.
  bool follow_redirects = true;
  // The channel to a target. Required.
  std::function<std::shared_ptr<grpc::Channel>(const std::string& target)> channel_factory;
  // Each Upstream's options; `channel`, `target` and the callbacks are filled in per endpoint.
  UpstreamOptions upstream;
  // Each RelayHub's options (relaying); `channel`, `target`, `leave_when_unreachable` and the
  // callback are filled in per endpoint.
  RelayHubOptions relay;
};

class Router {
 public:
  static constexpr size_t kMaxEndpoints = 64;

  // `counters` is not owned and must outlive the router.
  Router(RouterOptions options, AgentCounters* counters);
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // With a single target: creates its endpoint and starts its Upstream (connects at once).
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Shuts every Upstream and RelayHub down (joins their threads). Idempotent; Upstreams created
  // later are never started, and RelayHubs created later are shut down at once.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // The stub of `job_id`'s replica now, and its target.
  v1::Coordinator::Stub* Stub(const std::string& job_id, std::string* target)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The Upstream of `job_id`'s replica now (started on first use; an endpoint created for a
  // forwarded call or a relayed job alone opens no Upstream stream).
  Upstream* UpstreamFor(const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);
  // The Upstream of `target` (e.g. where a Join was answered, to declare the rank's chunks), not
  // started by this: its stream opens when a local Session attaches through UpstreamFor.
  Upstream* UpstreamAt(const std::string& target) ABSL_LOCKS_EXCLUDED(mu_);
  // The RelayHub of `job_id`'s replica now (created on first use; its stream opens when the first
  // downstream agent connects to it).
  RelayHub* RelayHubFor(const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);
  // The agent's counters (relayed streams count into them too).
  AgentCounters* counters() const { return counters_; }

  // A forwarded call of `job_id` at `target` ended with `status` (not OK): moves the job's route
  // as the header says. True when the status redirected to an owner and the job's route is no
  // longer `target`: the call may be retried at the new route.
  bool FollowFailure(const std::string& job_id, const std::string& target,
                     const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // `target` does not serve `job_id` (an attach refused or ended with UNAVAILABLE, or the
  // target's Upstream gave up its ranks): the job moves to `owner` when the refusal named one,
  // else to the next list entry.
  void NotServed(const std::string& job_id, const std::string& target, const std::string& owner)
      ABSL_LOCKS_EXCLUDED(mu_);

  // True while some Upstream has a stream open.
  bool connected() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Endpoint {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::Coordinator::Stub> stub;
    std::unique_ptr<Upstream> upstream;
    std::unique_ptr<RelayHub> relay;  // relaying only, created on first use
  };
  // The endpoint of `target`, created (its Upstream not started) when there is none.
  Endpoint& GetLocked(const std::string& target) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The endpoint's Upstream, started (its stream opened) unless shut down: only an endpoint that
  // carries local Sessions, or the single listed target, opens one, so that a relay opens none of
  // its own to the replicas it only relays to (their RelayHubs carry its agents' ranks).
  Upstream* StartedLocked(Endpoint& endpoint) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True for the single listed target: its streams reconnect forever.
  bool OnlyTargetLocked(const std::string& target) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountLocked(JobRoutes::Move move) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the job's route off `target`: to `owner` (unless empty, or past kMaxEndpoints), else to
  // the next list entry. True when it now routes to an owner other than `target`.
  bool MoveLocked(const std::string& job_id, const std::string& target, std::string owner)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const RouterOptions options_;
  AgentCounters* const counters_;

  mutable absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  JobRoutes routes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<Endpoint>> endpoints_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_ROUTER_H_
