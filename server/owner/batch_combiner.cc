#include "server/owner/batch_combiner.h"

namespace psync::server {

void BatchCombiner::Submit(Task* task, Round round) {
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back(task);
    if (running_) {
      // Done by the runner, or handed the queue (then done below, by this thread's rounds).
      mu_.Await(absl::Condition(
          +[](Task* t) { return t->done_ || t->promoted_; }, task));
      if (task->done_) return;
    }
    running_ = true;
  }
  Run(task, round);
}

void BatchCombiner::Run(Task* own, Round round) {
  std::vector<Task*> taken;
  size_t rounds_after_own = 0;
  bool own_done = false;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      for (Task* t : taken) t->done_ = true;
      taken.clear();
      if (queue_.empty()) {
        running_ = false;
        return;
      }
      if (own_done && rounds_after_own == max_rounds_) {
        queue_.front()->promoted_ = true;  // it runs the queue from here on (running_ stays)
        return;
      }
      taken.swap(queue_);
      ++rounds_;
    }
    round(absl::MakeConstSpan(taken));
    if (own_done) ++rounds_after_own;
    own_done = true;  // the first round takes the queue with `own` in it
  }
}

size_t BatchCombiner::rounds() const {
  absl::MutexLock lock(&mu_);
  return rounds_;
}

size_t BatchCombiner::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

}  // namespace psync::server
