#include "agent/router.h"

#include <utility>

#include "wire/wire_status.h"

namespace psync::agent {

Router::Router(RouterOptions options, AgentCounters* counters)
    : options_(std::move(options)), counters_(counters), routes_(options_.targets) {}

Router::~Router() { Shutdown(); }

void Router::Start() {
  absl::MutexLock lock(&mu_);
  if (options_.targets.size() == 1) StartedLocked(GetLocked(options_.targets[0]));
}

void Router::Shutdown() {
  std::vector<Upstream*> upstreams;
  std::vector<RelayHub*> hubs;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    for (auto& [target, endpoint] : endpoints_) {
      upstreams.push_back(endpoint->upstream.get());
      if (endpoint->relay != nullptr) hubs.push_back(endpoint->relay.get());
    }
  }
  // Unlocked: an upstream's or a hub's threads may be calling into the router.
  for (RelayHub* hub : hubs) hub->Shutdown();
  for (Upstream* upstream : upstreams) upstream->Shutdown();
}

Router::Endpoint& Router::GetLocked(const std::string& target) {
  auto it = endpoints_.find(target);
  if (it != endpoints_.end()) return *it->second;
  auto endpoint = std::make_unique<Endpoint>();
  endpoint->channel = options_.channel_factory(target);
  endpoint->stub = v1::Coordinator::NewStub(endpoint->channel);
  UpstreamOptions upstream = options_.upstream;
  upstream.channel = endpoint->channel;
  upstream.target = target;
  // Ranks of a replica that is gone or does not serve their job join again elsewhere; a single
  // listed target is reconnected to forever (a coordinator restarted there resumes them).
  upstream.leave_when_unreachable = !OnlyTargetLocked(target);
  upstream.on_not_served = [this, target](const std::string& job_id, const std::string& owner) {
    NotServed(job_id, target, owner);
  };
  endpoint->upstream = std::make_unique<Upstream>(std::move(upstream), counters_);
  return *endpoints_.emplace(target, std::move(endpoint)).first->second;
}

Upstream* Router::StartedLocked(Endpoint& endpoint) {
  if (!shut_down_ && endpoint.upstream->Start()) counters_->upstreams_started.fetch_add(1);
  return endpoint.upstream.get();
}

void Router::CountLocked(JobRoutes::Move move) {
  if (move == JobRoutes::Move::kRedirect) counters_->redirects.fetch_add(1);
  if (move == JobRoutes::Move::kRotate) counters_->rotations.fetch_add(1);
}

v1::Coordinator::Stub* Router::Stub(const std::string& job_id, std::string* target) {
  absl::MutexLock lock(&mu_);
  *target = routes_.Route(job_id);
  return GetLocked(*target).stub.get();
}

Upstream* Router::UpstreamFor(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  return StartedLocked(GetLocked(routes_.Route(job_id)));
}

Upstream* Router::UpstreamAt(const std::string& target) {
  absl::MutexLock lock(&mu_);
  return GetLocked(target).upstream.get();
}

RelayHub* Router::RelayHubFor(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  const std::string target = routes_.Route(job_id);
  Endpoint& endpoint = GetLocked(target);
  if (endpoint.relay == nullptr) {
    RelayHubOptions relay = options_.relay;
    relay.channel = endpoint.channel;
    relay.target = target;
    relay.leave_when_unreachable = !OnlyTargetLocked(target);
    relay.on_not_served = [this, target](const std::string& job, const std::string& owner) {
      NotServed(job, target, owner);
    };
    endpoint.relay = std::make_unique<RelayHub>(std::move(relay), counters_);
    if (shut_down_) endpoint.relay->Shutdown();
  }
  return endpoint.relay.get();
}

bool Router::OnlyTargetLocked(const std::string& target) const {
  return options_.targets.size() == 1 && target == options_.targets[0];
}

bool Router::FollowFailure(const std::string& job_id, const std::string& target,
                           const grpc::Status& status) {
  const grpc::StatusCode code = status.error_code();
  if (code != grpc::StatusCode::UNAVAILABLE && code != grpc::StatusCode::DEADLINE_EXCEEDED) {
    return false;
  }
  std::string owner;
  if (code == grpc::StatusCode::UNAVAILABLE) {
    if (std::optional<v1::OwnerRedirect> r = wire::OwnerRedirectOf(status)) owner = r->owner();
  }
  absl::MutexLock lock(&mu_);
  return MoveLocked(job_id, target, owner);
}

void Router::NotServed(const std::string& job_id, const std::string& target,
                       const std::string& owner) {
  absl::MutexLock lock(&mu_);
  MoveLocked(job_id, target, owner);
}

bool Router::MoveLocked(const std::string& job_id, const std::string& target, std::string owner) {
  if (!options_.follow_redirects) owner.clear();
  if (!owner.empty() && !endpoints_.contains(owner) && endpoints_.size() >= kMaxEndpoints) {
    owner.clear();  // bounded: an owner beyond the limit is treated as unknown
  }
  CountLocked(owner.empty() ? routes_.Failed(job_id, target)
                            : routes_.Redirected(job_id, target, owner));
  return !owner.empty() && routes_.Route(job_id) != target;
}

bool Router::connected() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [target, endpoint] : endpoints_) {
    if (endpoint->upstream->connected()) return true;
    if (endpoint->relay != nullptr && endpoint->relay->connected()) return true;
  }
  return false;
}

}  // namespace psync::agent
