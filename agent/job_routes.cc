#include "agent/job_routes.h"

#include <utility>

#include "client/job_start.h"

namespace psync::agent {

JobRoutes::JobRoutes(std::vector<std::string> targets) : targets_(std::move(targets)) {}

JobRoutes::JobRoute& JobRoutes::Get(const std::string& job_id) {
  auto it = routes_.find(job_id);
  if (it != routes_.end()) return it->second;
  JobRoute route;
  route.entry = JobStartIndex(job_id, targets_.size());
  route.current = targets_[route.entry];
  return routes_.emplace(job_id, std::move(route)).first->second;
}

const std::string& JobRoutes::Route(const std::string& job_id) { return Get(job_id).current; }

JobRoutes::Move JobRoutes::Redirected(const std::string& job_id, const std::string& target,
                                      const std::string& owner) {
  JobRoute& route = Get(job_id);
  if (route.current != target || targets_.size() == 1) return Move::kNone;
  if (!owner.empty() && owner != target) {
    route.current = owner;
    return Move::kRedirect;
  }
  return Failed(job_id, target);
}

JobRoutes::Move JobRoutes::Failed(const std::string& job_id, const std::string& target) {
  JobRoute& route = Get(job_id);
  if (route.current != target || targets_.size() == 1) return Move::kNone;
  // From the list entry to the next one; from a failed redirect owner back to the entry.
  if (route.current == targets_[route.entry]) route.entry = (route.entry + 1) % targets_.size();
  route.current = targets_[route.entry];
  return Move::kRotate;
}

}  // namespace psync::agent
