#include "worker/coordination.h"

#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace psync {
namespace worker {
namespace {

class ClientCoordination final : public Coordination {
 public:
  explicit ClientCoordination(psync::Client* client) : client_(client) {}

  absl::Status ReportStaged(uint64_t step, uint32_t chunk, absl::string_view optimizer) override {
    return client_->ReportStaged(step, chunk, optimizer);
  }
  absl::Status ReportStagedBatch(const std::vector<psync::v1::Staged>& items) override {
    return client_->ReportStagedBatch(items);
  }

  absl::Status ReportSyncDone(uint64_t step, uint32_t chunk,
                              std::vector<psync::v1::GroupChecksum> checksums,
                              uint32_t executions) override {
    return client_->ReportSyncDone(step, chunk, std::move(checksums), executions);
  }

  absl::StatusOr<psync::v1::SyncDirective> WaitForDirective(uint64_t step, uint32_t chunk,
                                                            absl::Duration timeout) override {
    return client_->WaitForDirective(step, chunk, timeout);
  }

 private:
  psync::Client* const client_;
};

// Reports through the client's asynchronous calls; the first refusal is kept.
class AsyncClientCoordination final : public Coordination {
 public:
  AsyncClientCoordination(psync::Client* client, absl::Duration flush_timeout)
      : client_(client), flush_timeout_(flush_timeout) {}
  ~AsyncClientCoordination() override { Flush().IgnoreError(); }

  absl::Status ReportStaged(uint64_t step, uint32_t chunk, absl::string_view optimizer) override {
    psync::v1::Staged item;
    item.set_step(step);
    item.set_chunk(chunk);
    item.set_optimizer(std::string(optimizer));
    return ReportStagedBatch({item});
  }
  absl::Status ReportStagedBatch(const std::vector<psync::v1::Staged>& items) override {
    if (absl::Status error = Start(); !error.ok()) return error;
    std::string what = items.empty() ? "Staged (empty)"
                                     : absl::StrCat("Staged of step ", items[0].step(), " chunk ",
                                                    items[0].chunk(), " ", items[0].optimizer());
    if (items.size() > 1) absl::StrAppend(&what, " (with ", items.size() - 1, " more check-ins)");
    client_->ReportStagedAsync(items, Answer(std::move(what)));
    return absl::OkStatus();
  }
  absl::Status ReportSyncDone(uint64_t step, uint32_t chunk,
                              std::vector<psync::v1::GroupChecksum> checksums,
                              uint32_t executions) override {
    if (absl::Status error = Start(); !error.ok()) return error;
    client_->ReportSyncDoneAsync(step, chunk, std::move(checksums), executions,
                                 Answer(absl::StrCat("SyncDone of step ", step, " chunk ", chunk)));
    return absl::OkStatus();
  }
  absl::StatusOr<psync::v1::SyncDirective> WaitForDirective(uint64_t step, uint32_t chunk,
                                                            absl::Duration timeout) override {
    if (absl::Status error = FirstError(); !error.ok()) return error;
    absl::StatusOr<psync::v1::SyncDirective> directive =
        client_->WaitForDirective(step, chunk, timeout);
    // A refused report explains a directive that never came better than the timeout does.
    if (absl::Status error = FirstError(); !directive.ok() && !error.ok()) return error;
    return directive;
  }
  absl::Status Flush() override {
    Answers& a = *answers_;
    absl::MutexLock lock(&a.mu);
    auto drained = [&a]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(a.mu) { return a.in_flight == 0; };
    uint64_t seen = a.answered - 1;
    while (a.in_flight > 0 && a.answered != seen) {
      seen = a.answered;
      a.mu.AwaitWithTimeout(absl::Condition(&drained), flush_timeout_);
    }
    if (a.in_flight > 0 && a.error.ok()) {
      return absl::DeadlineExceededError(absl::StrCat(a.in_flight, " reports got no answer within ",
                                                      absl::FormatDuration(flush_timeout_),
                                                      " of the last one"));
    }
    return a.error;
  }

 private:
  // Shared with the callbacks, which may outlive the link.
  struct Answers {
    absl::Mutex mu;
    uint64_t in_flight ABSL_GUARDED_BY(mu) = 0;
    uint64_t answered ABSL_GUARDED_BY(mu) = 0;
    absl::Status error ABSL_GUARDED_BY(mu);
  };

  absl::Status FirstError() {
    absl::MutexLock lock(&answers_->mu);
    return answers_->error;
  }
  // Counts a report about to be sent, unless one was refused already.
  absl::Status Start() {
    absl::MutexLock lock(&answers_->mu);
    if (!answers_->error.ok()) return answers_->error;
    ++answers_->in_flight;
    return absl::OkStatus();
  }
  psync::AckCallback Answer(std::string what) {
    return [answers = answers_, what = std::move(what)](absl::Status status) {
      absl::MutexLock lock(&answers->mu);
      --answers->in_flight;
      ++answers->answered;
      if (!status.ok() && answers->error.ok()) {
        answers->error = absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
      }
    };
  }

  psync::Client* const client_;
  const absl::Duration flush_timeout_;
  const std::shared_ptr<Answers> answers_ = std::make_shared<Answers>();
};

}  // namespace

std::unique_ptr<Coordination> NewClientCoordination(psync::Client* client) {
  return std::make_unique<ClientCoordination>(client);
}

std::unique_ptr<Coordination> NewAsyncClientCoordination(psync::Client* client,
                                                         absl::Duration flush_timeout) {
  return std::make_unique<AsyncClientCoordination>(client, flush_timeout);
}

}  // namespace worker
}  // namespace psync
