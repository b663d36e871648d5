#include "worker/async_link.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace psync {
namespace worker {

AsyncLink::AsyncLink(CoordinatorLink* link) : link_(link), sender_([this] { SendLoop(); }) {}

AsyncLink::~AsyncLink() {
  Flush().IgnoreError();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  sender_.join();
}

absl::Status AsyncLink::Enqueue(Report report) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  queue_.push_back(std::move(report));
  return absl::OkStatus();
}

absl::Status AsyncLink::ReportStaged(uint64_t step, uint32_t chunk, absl::string_view optimizer) {
  psync::v1::Staged staged;
  staged.set_step(step);
  staged.set_chunk(chunk);
  staged.set_optimizer(std::string(optimizer));
  return Enqueue({absl::StrCat("Staged of step ", step, " chunk ", chunk, " ", optimizer),
                  std::move(staged), nullptr});
}

absl::Status AsyncLink::ReportSyncDone(uint64_t step, uint32_t chunk,
                                       std::vector<psync::v1::GroupChecksum> checksums,
                                       uint32_t executions) {
  return Enqueue({absl::StrCat("SyncDone of step ", step, " chunk ", chunk), std::nullopt,
                  [this, step, chunk, checksums = std::move(checksums), executions] {
                    return link_->ReportSyncDone(step, chunk, checksums, executions);
                  }});
}

absl::StatusOr<psync::v1::SyncDirective> AsyncLink::WaitForDirective(uint64_t step, uint32_t chunk,
                                                                     absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
  }
  absl::StatusOr<psync::v1::SyncDirective> directive =
      link_->WaitForDirective(step, chunk, timeout);
  if (!directive.ok()) {
    // A refused report explains a directive that never came better than the timeout does.
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
  }
  return directive;
}

absl::Status AsyncLink::Flush() {
  absl::MutexLock lock(&mu_);
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (queue_.empty() && !sending_) || !error_.ok();
  };
  mu_.Await(absl::Condition(&drained));
  return error_;
}

void AsyncLink::SendLoop() {
  for (;;) {
    Report report;
    std::vector<psync::v1::Staged> batch;  // the check-ins at the front of the queue
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping
      report = std::move(queue_.front());
      queue_.pop_front();
      if (report.staged.has_value()) {
        batch.push_back(std::move(*report.staged));
        while (!queue_.empty() && queue_.front().staged.has_value()) {
          batch.push_back(std::move(*queue_.front().staged));
          queue_.pop_front();
        }
        if (batch.size() > 1) {
          absl::StrAppend(&report.what, " (with ", batch.size() - 1, " more check-ins)");
        }
      }
      sending_ = true;
    }
    absl::Status status = batch.empty() ? report.send()
                          : batch.size() == 1
                              ? link_->ReportStaged(batch[0].step(), batch[0].chunk(),
                                                    batch[0].optimizer())
                              : link_->ReportStagedBatch(batch);
    absl::MutexLock lock(&mu_);
    sending_ = false;
    if (!status.ok() && error_.ok()) {
      error_ = absl::Status(status.code(), absl::StrCat(report.what, ": ", status.message()));
      queue_.clear();
    }
  }
}

}  // namespace worker
}  // namespace psync
