// RelayedRoutes: where one downstream node agent's AgentSession goes on a relay. Each message is
// handed to the RelayHub (agent/relay_hub.h) of a coordinator replica, chosen by its job through
// the relay's Router (agent/router.h), so a relay in front of several replicas, or of a Service
// whose replicas redirect, carries each job to its owner while the node agent keeps its one stream
// to the relay:
//  * an attach goes to the hub of its job's route now, which becomes its rank's hub;
//  * a detach goes to the hub of its rank's newest attach (a hub that never saw the attach answers
//    it and changes nothing);
//  * a batch goes to the hub of its first rank's newest attach; a rank of it attached at another
//    hub (its job moved between the two attaches) is refused there, as a coordinator refuses a
//    rank not attached on the stream (FAILED_PRECONDITION);
//  * anything else goes to the hub of its job's route, which answers it.
// The agent connects to a hub when its first message goes there, and Disconnect() detaches its
// ranks from every hub it used.
//
// Thread-safety: thread-safe; Receive and Disconnect only queue (the hubs never block on I/O), so
// reactors call them. Ownership: borrows the router, which must outlive it; shares the agent.
#ifndef PSYNC_AGENT_RELAYED_ROUTES_H_
#define PSYNC_AGENT_RELAYED_ROUTES_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/relay_hub.h"
#include "agent/relayed_agent.h"
#include "agent/router.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "serve/job_rank_map.h"

namespace psync::agent {

class RelayedRoutes {
 public:
  // Counts the agent in the router's counters (relayed_agents) until Disconnect().
  RelayedRoutes(Router* router, std::shared_ptr<RelayedAgent> agent);
  ~RelayedRoutes() { Disconnect(); }
  RelayedRoutes(const RelayedRoutes&) = delete;
  RelayedRoutes& operator=(const RelayedRoutes&) = delete;

  // One AgentUp read from the agent's stream (its batch may be moved out). Nothing after
  // Disconnect().
  void Receive(v1::AgentUp* up) ABSL_LOCKS_EXCLUDED(mu_);
  // The agent's stream ended: its ranks are detached from every hub. Idempotent.
  void Disconnect() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The hub `up` goes to.
  RelayHub* HubForLocked(const v1::AgentUp& up) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Router* const router_;
  const std::shared_ptr<RelayedAgent> agent_;

  // Held while a message is handed to a hub, so that a Disconnect racing a Receive never leaves
  // the agent connected to a hub.
  absl::Mutex mu_;
  bool disconnected_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<RelayHub*> hubs_ ABSL_GUARDED_BY(mu_);             // connected, in first-use order
  serve::JobRankMap<RelayHub*> rank_hubs_ ABSL_GUARDED_BY(mu_);  // hub of a rank's newest attach
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_RELAYED_ROUTES_H_
