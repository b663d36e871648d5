// TimedMutexLock: an absl::MutexLock that also adds to a LockTimes (and to a second one, such as
// a total over several locks, when given) how long its owner waited for the mutex and how long it
// held it, so that a coordinator can say whether a lock is what limits it
// (psync_coordinator_lock_*_seconds_total, psync_job_lock_*_seconds_total). Costs two reads of the
// steady clock per acquisition.
//
// LockTimes is thread-safe: relaxed atomic totals, read at any time (not a synchronization point).
// TimedMutexLock is a scoped lock like absl::MutexLock; it borrows both pointers.
#ifndef PSYNC_SERVER_TIMED_LOCK_H_
#define PSYNC_SERVER_TIMED_LOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace psync::server {

struct LockTimes {
  std::atomic<int64_t> wait_ns{0};
  std::atomic<int64_t> held_ns{0};
  std::atomic<uint64_t> acquisitions{0};

  absl::Duration wait() const { return absl::Nanoseconds(wait_ns.load(std::memory_order_relaxed)); }
  absl::Duration held() const { return absl::Nanoseconds(held_ns.load(std::memory_order_relaxed)); }
};

// Nanoseconds on the steady clock (for durations only).
inline int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class ABSL_SCOPED_LOCKABLE TimedMutexLock {
 public:
  TimedMutexLock(absl::Mutex* mu, LockTimes* times, LockTimes* also = nullptr)
      ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu), times_(times), also_(also) {
    const int64_t asked = SteadyNanos();
    mu_->Lock();
    acquired_ = SteadyNanos();
    Add(&LockTimes::wait_ns, acquired_ - asked);
  }
  ~TimedMutexLock() ABSL_UNLOCK_FUNCTION() {
    const int64_t released = SteadyNanos();
    mu_->Unlock();
    Add(&LockTimes::held_ns, released - acquired_);
    times_->acquisitions.fetch_add(1, std::memory_order_relaxed);
    if (also_ != nullptr) also_->acquisitions.fetch_add(1, std::memory_order_relaxed);
  }
  TimedMutexLock(const TimedMutexLock&) = delete;
  TimedMutexLock& operator=(const TimedMutexLock&) = delete;

 private:
  void Add(std::atomic<int64_t> LockTimes::*field, int64_t ns) {
    (times_->*field).fetch_add(ns, std::memory_order_relaxed);
    if (also_ != nullptr) (also_->*field).fetch_add(ns, std::memory_order_relaxed);
  }

  absl::Mutex* const mu_;
  LockTimes* const times_;
  LockTimes* const also_;
  int64_t acquired_ = 0;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_TIMED_LOCK_H_
