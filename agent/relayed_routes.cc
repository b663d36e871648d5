#include "agent/relayed_routes.h"

#include <algorithm>
#include <utility>

namespace psync::agent {

RelayedRoutes::RelayedRoutes(Router* router, std::shared_ptr<RelayedAgent> agent)
    : router_(router), agent_(std::move(agent)) {
  router_->counters()->relayed_agents.fetch_add(1);
}

void RelayedRoutes::Receive(v1::AgentUp* up) {
  absl::MutexLock lock(&mu_);
  if (disconnected_) return;
  RelayHub* hub = HubForLocked(*up);
  if (std::find(hubs_.begin(), hubs_.end(), hub) == hubs_.end()) {
    hubs_.push_back(hub);
    hub->Connect(agent_);
  }
  if (up->has_attach()) {
    const v1::Attach& attach = up->attach().attach();
    rank_hubs_(attach.job_id(), attach.rank()) = hub;
  }
  hub->Receive(agent_, up);
}

RelayHub* RelayedRoutes::HubForLocked(const v1::AgentUp& up) {
  switch (up.kind_case()) {
    case v1::AgentUp::kAttach:
      return router_->RelayHubFor(up.attach().attach().job_id());
    case v1::AgentUp::kDetach: {
      const v1::AgentDetach& detach = up.detach();
      RelayHub* const* hub = rank_hubs_.Find(detach.job_id(), detach.rank());
      return hub != nullptr ? *hub : router_->RelayHubFor(detach.job_id());
    }
    case v1::AgentUp::kBatch: {
      const v1::AgentBatch& batch = up.batch();
      if (batch.ranks_size() > 0) {
        RelayHub* const* hub = rank_hubs_.Find(batch.job_id(), batch.ranks(0));
        if (hub != nullptr) return *hub;
      }
      return router_->RelayHubFor(batch.job_id());
    }
    case v1::AgentUp::KIND_NOT_SET:
      break;
  }
  return router_->RelayHubFor("");
}

void RelayedRoutes::Disconnect() {
  absl::MutexLock lock(&mu_);
  if (disconnected_) return;
  disconnected_ = true;
  for (RelayHub* hub : hubs_) hub->Disconnect(agent_.get());
  router_->counters()->relayed_agents.fetch_sub(1);
}

}  // namespace psync::agent
