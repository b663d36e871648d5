// JobGate: whether this coordinator serves a job now, for coordinator replicas that share the
// jobs (server/ha/replica.h implements it over etcd). A coordinator without one serves every job
// at epoch 0.
//
// Refusals are NotServedHere statuses (wire/not_served.h): UNAVAILABLE with an OwnerRedirect
// naming the owner, or no owner when nobody may serve the job now. Implementations are
// thread-safe, and never call into the Coordinator from these methods (the Coordinator calls
// AdmitMessage with a job's lock held, for several jobs at once).
#ifndef PSYNC_SERVER_OWNER_JOB_GATE_H_
#define PSYNC_SERVER_OWNER_JOB_GATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psync::server {

class JobGate {
 public:
  virtual ~JobGate() = default;
  // A Join of `job_id`: its owner's epoch when this coordinator serves the job, claiming it first
  // when nobody owns it and this coordinator should. May wait for etcd (bounded by its call
  // timeout); never called with the Coordinator's lock held.
  virtual absl::StatusOr<uint64_t> AdmitJoin(const std::string& job_id) = 0;
  // Any other message of `job_id` (attach, check-ins, sync-dones, leaves): the epoch when this
  // coordinator serves the job now. Does not block: decided from what the gate holds in memory.
  virtual absl::StatusOr<uint64_t> AdmitMessage(const std::string& job_id) = 0;
  // A read of `job_id` (status, chunk, audit, trace; the HTTP API's too), fenced like a message:
  // the epoch when this coordinator serves the job now; NOT_FOUND when, as far as the gate knows
  // for sure, no coordinator owns it (the coordinator answers from its history of ended jobs);
  // else the NotServedHere status (a redirect to the owner, or none when the gate cannot tell who
  // owns the job now). Does not block.
  virtual absl::StatusOr<uint64_t> AdmitQuery(const std::string& job_id) = 0;

  // The parts of `job_id`'s audit that its earlier owners published (server/ha/owner_audit.h
  // decodes them), oldest first; empty without replicas. Does not block: from memory.
  virtual std::vector<std::string> EarlierOwnerAudits(const std::string& job_id) {
    (void)job_id;
    return {};
  }
  // `job_id` ended here (EndJob, every rank finished, evicted): the gate forgets what it keeps
  // for the job beyond its ownership. Does not block.
  virtual void JobEnded(const std::string& job_id) { (void)job_id; }
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_JOB_GATE_H_
