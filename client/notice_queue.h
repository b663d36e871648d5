// NoticeQueue: what a psync::Client keeps of the notices the coordinator sends down a Session
// (SyncDirective, StepSkipped, Abort) until the training loop asks for them.
//
// Semantics:
//  * Only notices of the current generation (SetGeneration) are kept; others are dropped and
//    counted as stale.
//  * Directives are de-duplicated by (generation, step, chunk): a reconnect makes the coordinator
//    re-send the directives this rank has not reported SyncDone for, and those repeats are dropped
//    and counted. Each directive is handed out at most once: WaitForDirective() returns it to one
//    caller, a second wait for the same (step, chunk) waits for a directive that will not come.
//  * An Abort of the current generation makes every wait (current and later) return ABORTED with
//    the coordinator's reason; Fail() does the same with any status (client closed or failed).
//  * Memory is bounded: directives and skips more than `window_steps` steps behind the newest step
//    seen are forgotten (a repeat that old is then no longer recognized as a duplicate).
//
// Thread-safe: the client's reader thread adds, any number of threads wait.
#ifndef PSYNC_CLIENT_NOTICE_QUEUE_H_
#define PSYNC_CLIENT_NOTICE_QUEUE_H_

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace psync {

class NoticeQueue {
 public:
  enum class AddResult { kAccepted, kDuplicate, kStale, kIgnored };

  struct Counters {
    uint64_t directives_received = 0;   // distinct directives accepted
    uint64_t duplicate_directives = 0;  // repeats dropped by the de-duplication
    uint64_t stale_notices = 0;         // notices of another generation, dropped
  };

  explicit NoticeQueue(uint64_t window_steps = 1024) : window_steps_(window_steps) {}

  NoticeQueue(const NoticeQueue&) = delete;
  NoticeQueue& operator=(const NoticeQueue&) = delete;

  // Sets the generation whose notices are kept. Changing it forgets everything kept for the
  // previous generation (including its abort); counters are kept.
  void SetGeneration(uint64_t generation) ABSL_LOCKS_EXCLUDED(mu_);

  // The coordinator restarted and continues this rank's run in `generation`: what was kept stays
  // (directives seen and not yet handed out, skips), now under `generation`, so a directive the
  // new coordinator sends again is a duplicate. The old generation's abort, if any, is forgotten.
  void ContinueGeneration(uint64_t generation) ABSL_LOCKS_EXCLUDED(mu_);

  // Records one notice. kAccepted: new and kept (waiters wake). kDuplicate: a directive already
  // seen. kStale: another generation. kIgnored: an Ack or an empty message (not a notice).
  AddResult Add(const psync::v1::SessionDown& notice) ABSL_LOCKS_EXCLUDED(mu_);

  // Returns the directive of (current generation, step, chunk) once it is here, and forgets it.
  // DEADLINE_EXCEEDED when `deadline` passes first; ABORTED (the abort reason) once the generation
  // is aborted; the Fail() status once failed.
  absl::StatusOr<psync::v1::SyncDirective> WaitForDirective(uint64_t step, uint32_t chunk,
                                                            absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // OK once StepSkipped(current generation, step) arrived (it stays: every call then returns OK);
  // errors as WaitForDirective.
  absl::Status WaitForStepSkipped(uint64_t step, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // True once StepSkipped(current generation, step) arrived.
  bool HasStepSkipped(uint64_t step) const ABSL_LOCKS_EXCLUDED(mu_);

  // Every wait, current and later, returns `status` (non-OK). The first call wins.
  void Fail(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);

  Counters counters() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Key = std::pair<uint64_t, uint32_t>;  // (step, chunk)

  // The error every wait returns now, or OK.
  absl::Status Terminal() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until `condition` holds or `deadline`; returns at once when it holds or the deadline
  // has passed.
  void AwaitUntil(const absl::Condition& condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Trim() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const uint64_t window_steps_;

  mutable absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t newest_step_ ABSL_GUARDED_BY(mu_) = 0;
  // Directives seen in this generation (handed out or not): the de-duplication set.
  absl::btree_set<Key> seen_ ABSL_GUARDED_BY(mu_);
  // Directives not yet handed out.
  absl::btree_map<Key, psync::v1::SyncDirective> ready_ ABSL_GUARDED_BY(mu_);
  absl::btree_set<uint64_t> skipped_ ABSL_GUARDED_BY(mu_);
  std::optional<psync::v1::Abort> abort_ ABSL_GUARDED_BY(mu_);
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  Counters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psync

#endif  // PSYNC_CLIENT_NOTICE_QUEUE_H_
