// JobRoutes: which coordinator replica a node agent sends each job to. The agent is given a list of
// replicas (AgentOptions::target "a:7070,b:7070,c:7070"); a job starts on the list entry at
// std::hash(job_id) % n (as psync::Client starts, client/client.cc, so a rank and its agent pick
// the same replica first), moves to the owner a replica names in an OwnerRedirect, and moves on
// to the next list entry when its replica fails (unreachable, or it redirects to nobody). A
// redirect owner that fails is forgotten: the job goes back to its list entry. With one target (a
// single coordinator, or a Kubernetes Service in front of replicas) a job follows redirects to
// its owner, as psync::Client does, but a failure of that target moves nothing: a coordinator
// restarted at the same address is resumed where it was.
//
// Pure: no I/O, no clock. Every failure names the target it came from, and changes nothing unless
// that target is still the job's route, so the same failure reported by several ranks moves a job
// once. Thread-compatible (the agent's Router adds the lock). Only jobs that moved off their list
// entry are remembered, at most `max_moved` of them (an agent runs for months, through many
// jobs): past that the least recently used is forgotten, and its next call starts on its list
// entry again, one redirect away from the owner at worst.
#ifndef PSYNC_AGENT_JOB_ROUTES_H_
#define PSYNC_AGENT_JOB_ROUTES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace psync::agent {

class JobRoutes {
 public:
  // What a failure did to the job's route.
  enum class Move {
    kNone,      // nothing: the single target failed, or the route had moved already
    kRedirect,  // to the owner a redirect named
    kRotate,    // to the next list entry (or back to the list from a failed redirect owner)
  };

  static constexpr size_t kMaxMovedJobs = 4096;

  // `targets` must not be empty; `max_moved` >= 1.
  explicit JobRoutes(std::vector<std::string> targets, size_t max_moved = kMaxMovedJobs);

  // The target `job_id` goes to now (its start entry the first time).
  const std::string& Route(const std::string& job_id);
  // A call or stream of `job_id` at `target` was refused with a redirect to `owner` (empty: nobody
  // may serve the job now). A non-empty owner other than `target` becomes the route; an empty one
  // (or the target itself) counts as a failure of `target` (Failed). kNone when `target` is not
  // the job's route (any more).
  Move Redirected(const std::string& job_id, const std::string& target, const std::string& owner);
  // `target` failed for `job_id` (unreachable, or it could not serve the job): the route moves to
  // the next list entry, or back to its list entry if `target` was a redirect owner.
  Move Failed(const std::string& job_id, const std::string& target);

  size_t size() const { return targets_.size(); }
  const std::vector<std::string>& targets() const { return targets_; }
  // Jobs remembered off their list entry.
  size_t moved_jobs() const { return routes_.size(); }

 private:
  struct JobRoute {
    size_t entry = 0;     // index into targets_ of the job's list entry
    std::string current;  // targets_[entry], or a redirect owner
    uint64_t last_used = 0;
  };
  // The job's route: remembered, or its start entry.
  JobRoute Lookup(const std::string& job_id) const;
  // Remembers `route` unless it is the job's start entry again; forgets the least recently used
  // routes past max_moved_.
  void Store(const std::string& job_id, JobRoute route);

  const std::vector<std::string> targets_;
  const size_t max_moved_;
  absl::flat_hash_map<std::string, JobRoute> routes_;  // jobs off their start entry
  uint64_t uses_ = 0;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_JOB_ROUTES_H_
