// SkipRecovery: settles skip votes whose StepSkipped was lost while the agent's stream to the
// coordinator was down.
//
// The coordinator re-sends pending directives (and the Abort of an aborted generation) when a
// rank is attached again, but not StepSkipped. A rank behind an agent keeps its Session with the
// agent through an upstream break, so the client's own recovery (which runs on its re-attach)
// does not run; the agent does it instead: after re-attaching its ranks, it asks the coordinator
// for the job's status and, for each rank still waiting for the StepSkipped of a step it voted
// to skip, hands the rank that StepSkipped if every rank is past the step (a skip moves every rank
// past the step at once, and a rank that voted to skip a step leaves it only that way). Nothing
// is settled for another generation or an aborted one (its Abort is re-sent on attach).
//
// Thread-safe. Calls run in the background (gRPC's callback threads); the destructor cancels those
// in flight and waits for them. Does not own the stub.
#ifndef PSYNC_AGENT_SKIP_RECOVERY_H_
#define PSYNC_AGENT_SKIP_RECOVERY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "agent/local_link.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::agent {

class SkipRecovery {
 public:
  explicit SkipRecovery(v1::Coordinator::Stub* coordinator) : coordinator_(coordinator) {}
  ~SkipRecovery();
  SkipRecovery(const SkipRecovery&) = delete;
  SkipRecovery& operator=(const SkipRecovery&) = delete;

  // `links`: re-attached local Sessions of job `job_id` (those without skip votes are skipped).
  void Recover(const std::string& job_id, std::vector<std::shared_ptr<LocalLink>> links)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Call;
  void Done(Call* call) ABSL_LOCKS_EXCLUDED(mu_);

  v1::Coordinator::Stub* const coordinator_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<Call*> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_SKIP_RECOVERY_H_
