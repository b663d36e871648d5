// FakeCoordination: a Coordination for tests of the training loop without a coordinator.
//
// It records every call as a line ("staged 0 1 dense", "done 0 1 x2", "wait 0 1"). A directive
// is handed out at once (or fails with `directive_status`), which counts as the chunk's release;
// a SyncDone of a chunk not released yet is answered `early_sync_done_status` (OK by default; set
// it to FAILED_PRECONDITION to act like the coordinator).
//
// Thread-safe. Configure the public statuses before the loop starts.
#ifndef PSYNC_WORKER_FAKE_COORDINATION_H_
#define PSYNC_WORKER_FAKE_COORDINATION_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "worker/coordination.h"

namespace psync {
namespace worker {

class FakeCoordination final : public Coordination {
 public:
  struct SyncDoneCall {
    uint64_t step;
    uint32_t chunk;
    uint32_t executions;
    size_t checksums;
  };

  absl::Status ReportStaged(uint64_t step, uint32_t chunk, absl::string_view optimizer) override {
    absl::MutexLock lock(&mu_);
    log_.push_back(absl::StrCat("staged ", step, " ", chunk, " ", optimizer));
    return absl::OkStatus();
  }

  absl::Status ReportSyncDone(uint64_t step, uint32_t chunk,
                              std::vector<psync::v1::GroupChecksum> checksums,
                              uint32_t executions) override {
    absl::MutexLock lock(&mu_);
    log_.push_back(absl::StrCat("done ", step, " ", chunk, " x", executions));
    sync_dones_.push_back({step, chunk, executions, checksums.size()});
    if (!released_[{step, chunk}]) return early_sync_done_status;
    return absl::OkStatus();
  }

  absl::StatusOr<psync::v1::SyncDirective> WaitForDirective(uint64_t step, uint32_t chunk,
                                                            absl::Duration) override {
    absl::MutexLock lock(&mu_);
    log_.push_back(absl::StrCat("wait ", step, " ", chunk));
    if (!directive_status.ok()) return directive_status;
    released_[{step, chunk}] = true;
    psync::v1::SyncDirective d;
    d.set_step(step);
    d.set_chunk(chunk);
    return d;
  }

  std::vector<std::string> log() const {
    absl::MutexLock lock(&mu_);
    return log_;
  }
  std::vector<SyncDoneCall> sync_dones() const {
    absl::MutexLock lock(&mu_);
    return sync_dones_;
  }

  absl::Status early_sync_done_status = absl::OkStatus();
  absl::Status directive_status = absl::OkStatus();

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
  std::vector<SyncDoneCall> sync_dones_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<uint64_t, uint32_t>, bool> released_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_FAKE_COORDINATION_H_
