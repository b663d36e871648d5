// BatchCombiner: the batches of one job applied by one thread at a time, several to a round, in
// the order they were submitted. A caller submits its batch (a Task) and either becomes the runner,
// when no other caller is running the queue, or waits until a runner has applied its batch. The
// runner takes every queued task at once and hands them to `round`, which applies them one after
// the other under a single acquisition of the job's lock; it keeps running rounds while tasks
// arrive, at most `max_rounds` of them after its own (so that its own caller is not held up for
// long), then passes the queue to the longest waiting caller, which runs it from then on.
//
// Why: under load, many stream threads each take the job's lock for their own batch; every
// hand-over of the lock moves the job's state to another core and usually wakes a sleeper, and
// the lock's holder then spends most of its time on cache misses. A runner applying the queued
// batches back to back keeps that state on one core, and the lock changes hands once per round.
//
// Thread-safe. A Task belongs to its submitter, which stays in Submit until the task is done, so
// the runner may use the task's fields in `round` (a done task is never touched again).
#ifndef PSYNC_SERVER_OWNER_BATCH_COMBINER_H_
#define PSYNC_SERVER_OWNER_BATCH_COMBINER_H_

#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace psync::server {

class BatchCombiner {
 public:
  // What a submitter hands over; subclassed by the caller with its batch and the room for its
  // answer. Not reused.
  class Task {
   public:
    virtual ~Task() = default;

   private:
    friend class BatchCombiner;
    bool done_ = false;      // applied by a round; guarded by the combiner's mutex
    bool promoted_ = false;  // handed the queue to run; guarded by the combiner's mutex
  };
  using Round = absl::FunctionRef<void(absl::Span<Task* const> tasks)>;

  // `max_rounds`: rounds a runner runs after the one that applied its own task, while tasks keep
  // arriving.
  explicit BatchCombiner(size_t max_rounds = 8) : max_rounds_(max_rounds) {}
  BatchCombiner(const BatchCombiner&) = delete;
  BatchCombiner& operator=(const BatchCombiner&) = delete;

  // Returns once `round` has been called with `task` (on this thread or on another caller's, whose
  // own `round` is then used: every submitter of one combiner must pass an equivalent round).
  void Submit(Task* task, Round round) ABSL_LOCKS_EXCLUDED(mu_);

  // Rounds run so far, and tasks waiting for a round now (for tests and metrics).
  size_t rounds() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t queued() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Runs rounds until the queue is empty or the bound is reached; `own` is done on return.
  void Run(Task* own, Round round) ABSL_LOCKS_EXCLUDED(mu_);

  const size_t max_rounds_;
  mutable absl::Mutex mu_;
  std::vector<Task*> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // a runner owns the queue
  size_t rounds_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_BATCH_COMBINER_H_
