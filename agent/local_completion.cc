#include "agent/local_completion.h"

namespace psync::agent {

void LocalCompletion::Declare(const v1::JoinRequest& join) {
  if (!jobs_.contains(join.job_id()) && jobs_.size() >= max_jobs_) {
    // Forget the job declared longest ago (its ranks have long joined again or left).
    auto oldest = jobs_.begin();
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
      if (it->second.declared < oldest->second.declared) oldest = it;
    }
    jobs_.erase(oldest);
  }
  Job& job = jobs_[join.job_id()];
  job.declared = ++declares_;
  RankChunks& declared = job.ranks[join.rank()];
  for (const auto& [chunk, optimizers] : declared) job.expected[chunk] -= optimizers;
  declared.clear();
  for (const v1::ChunkPlan& part : join.chunks()) {
    const uint32_t optimizers = static_cast<uint32_t>(part.optimizers_size());
    if (optimizers == 0) continue;
    declared[part.chunk()] += optimizers;
    job.expected[part.chunk()] += optimizers;
  }
}

uint32_t LocalCompletion::Expected(const std::string& job, uint32_t chunk) const {
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return 0;
  auto e = j->second.expected.find(chunk);
  return e == j->second.expected.end() ? 0 : e->second;
}

bool LocalCompletion::Checkin(const std::string& job, uint32_t rank, uint64_t step,
                              uint32_t chunk) {
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return true;  // no plan of the job here: cannot tell
  auto r = j->second.ranks.find(rank);
  if (r == j->second.ranks.end() || !r->second.contains(chunk)) return true;
  const uint32_t expected = Expected(job, chunk);
  Key key(step, job, chunk);
  auto it = open_.find(key);
  if (it == open_.end()) {
    if (expected == 1) return true;
    while (open_.size() >= max_open_) open_.erase(open_.begin());
    open_.emplace(std::move(key), 1);
    return false;
  }
  if (++it->second < expected) return false;
  open_.erase(it);
  return true;
}

}  // namespace psync::agent
