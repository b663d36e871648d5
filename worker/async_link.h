// AsyncLink: a CoordinatorLink that sends check-ins and SyncDones from a background thread, so the
// training loop does not wait one round trip per report.
//
// What: ReportStaged() and ReportSyncDone() queue the report and return at once; one sender thread
// passes the reports to the wrapped link in the order they were queued (so a SyncDone of step s
// still reaches the coordinator before the check-ins of step s + 1). Check-ins queued one after
// another while the sender waited for an answer go out together as one ReportStagedBatch, so a
// burst of check-ins costs one round trip, not one each. WaitForDirective() waits on
// the wrapped link directly: a chunk's directive comes once every contributor's check-in, queued
// earlier, was sent and applied.
//
// Errors: a report the coordinator refuses (any non-OK status) is kept; from then on every call
// returns it (prefixed with the report it answered) and nothing more is sent. Flush() waits until
// the queue is empty and returns that first error, or OK. Use it where every error must be seen:
// in the coordinated mode, where a refused report is a bug.
//
// Thread-safety: all methods are thread-safe. Ownership: borrows `link`, which must outlive this
// object; the destructor flushes the queue (bounded by the wrapped link's own call timeouts) and
// joins the sender thread.
#ifndef PSYNC_WORKER_ASYNC_LINK_H_
#define PSYNC_WORKER_ASYNC_LINK_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "worker/coordinator_link.h"

namespace psync {
namespace worker {

class AsyncLink final : public CoordinatorLink {
 public:
  explicit AsyncLink(CoordinatorLink* link);
  ~AsyncLink() override;
  AsyncLink(const AsyncLink&) = delete;
  AsyncLink& operator=(const AsyncLink&) = delete;

  absl::Status ReportStaged(uint64_t step, uint32_t chunk, absl::string_view optimizer) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ReportSyncDone(uint64_t step, uint32_t chunk,
                              std::vector<psync::v1::GroupChecksum> checksums,
                              uint32_t executions) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<psync::v1::SyncDirective> WaitForDirective(uint64_t step, uint32_t chunk,
                                                            absl::Duration timeout) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Flush() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Report {
    std::string what;  // for error messages
    // A check-in (merged with the check-ins queued right after it), or any other report (`send`).
    std::optional<psync::v1::Staged> staged;
    std::function<absl::Status()> send;
  };

  absl::Status Enqueue(Report report) ABSL_LOCKS_EXCLUDED(mu_);
  void SendLoop() ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  CoordinatorLink* const link_;

  absl::Mutex mu_;
  std::deque<Report> queue_ ABSL_GUARDED_BY(mu_);
  bool sending_ ABSL_GUARDED_BY(mu_) = false;  // the sender holds a report it took off the queue
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);

  std::thread sender_;
};

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_ASYNC_LINK_H_
