#include "agent/skip_recovery.h"

#include <utility>

namespace psync::agent {

struct SkipRecovery::Call {
  grpc::ClientContext context;
  v1::GetJobStatusRequest request;
  v1::JobStatus status;
  std::vector<std::shared_ptr<LocalLink>> links;
};

SkipRecovery::~SkipRecovery() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (Call* call : calls_) call->context.TryCancel();
  mu_.Await(absl::Condition(
      +[](absl::flat_hash_set<Call*>* calls) { return calls->empty(); }, &calls_));
}

void SkipRecovery::Recover(const std::string& job_id,
                           std::vector<std::shared_ptr<LocalLink>> links) {
  std::vector<std::shared_ptr<LocalLink>> voting;
  for (std::shared_ptr<LocalLink>& link : links) {
    if (!link->SkipVotes().empty()) voting.push_back(std::move(link));
  }
  if (voting.empty()) return;
  auto* call = new Call();
  call->request.set_job_id(job_id);
  call->links = std::move(voting);
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      delete call;
      return;
    }
    calls_.insert(call);
  }
  coordinator_->async()->GetJobStatus(&call->context, &call->request, &call->status,
                                      [this, call](grpc::Status status) {
                                        if (status.ok()) Done(call);
                                        absl::MutexLock lock(&mu_);
                                        calls_.erase(call);
                                        delete call;
                                      });
}

void SkipRecovery::Done(Call* call) {
  const v1::JobStatus& job = call->status;
  if (job.state() == "ABORTED") return;
  for (const std::shared_ptr<LocalLink>& link : call->links) {
    if (link->attach().generation() != job.generation()) continue;
    for (uint64_t step : link->SkipVotes()) {
      if (step >= job.min_rank_step()) continue;
      v1::SessionDown down;
      down.mutable_step_skipped()->set_generation(job.generation());
      down.mutable_step_skipped()->set_step(step);
      link->Notice(down);
    }
  }
}

}  // namespace psync::agent
