#include "agent/job_routes.h"

#include <algorithm>
#include <utility>

#include "client/job_start.h"

namespace psync::agent {

JobRoutes::JobRoutes(std::vector<std::string> targets, size_t max_moved)
    : targets_(std::move(targets)), max_moved_(std::max<size_t>(max_moved, 1)) {}

JobRoutes::JobRoute JobRoutes::Lookup(const std::string& job_id) const {
  auto it = routes_.find(job_id);
  if (it != routes_.end()) return it->second;
  JobRoute route;
  route.entry = JobStartIndex(job_id, targets_.size());
  route.current = targets_[route.entry];
  return route;
}

void JobRoutes::Store(const std::string& job_id, JobRoute route) {
  if (route.entry == JobStartIndex(job_id, targets_.size()) &&
      route.current == targets_[route.entry]) {
    routes_.erase(job_id);
    return;
  }
  route.last_used = ++uses_;
  routes_[job_id] = std::move(route);
  if (routes_.size() <= max_moved_) return;
  // Past the bound: forget the least recently used quarter at once, so that the scan is paid once
  // per many new jobs, not once per job.
  std::vector<uint64_t> uses;
  uses.reserve(routes_.size());
  for (const auto& [job, r] : routes_) uses.push_back(r.last_used);
  const size_t drop = std::max<size_t>(routes_.size() - max_moved_, routes_.size() / 4);
  std::nth_element(uses.begin(), uses.begin() + static_cast<ptrdiff_t>(drop - 1), uses.end());
  const uint64_t oldest_kept = uses[drop - 1] + 1;
  for (auto it = routes_.begin(); it != routes_.end();) {
    if (it->second.last_used < oldest_kept) {
      routes_.erase(it++);
    } else {
      ++it;
    }
  }
}

const std::string& JobRoutes::Route(const std::string& job_id) {
  auto it = routes_.find(job_id);
  if (it == routes_.end()) return targets_[JobStartIndex(job_id, targets_.size())];
  it->second.last_used = ++uses_;
  return it->second.current;
}

JobRoutes::Move JobRoutes::Redirected(const std::string& job_id, const std::string& target,
                                      const std::string& owner) {
  JobRoute route = Lookup(job_id);
  if (route.current != target) return Move::kNone;
  if (!owner.empty() && owner != target) {
    route.current = owner;
    Store(job_id, std::move(route));
    return Move::kRedirect;
  }
  return Failed(job_id, target);
}

JobRoutes::Move JobRoutes::Failed(const std::string& job_id, const std::string& target) {
  JobRoute route = Lookup(job_id);
  if (route.current != target) return Move::kNone;
  if (targets_.size() == 1 && route.current == targets_[0]) return Move::kNone;
  // From the list entry to the next one; from a failed redirect owner back to the entry.
  if (route.current == targets_[route.entry]) route.entry = (route.entry + 1) % targets_.size();
  route.current = targets_[route.entry];
  Store(job_id, std::move(route));
  return Move::kRotate;
}

}  // namespace psync::agent
