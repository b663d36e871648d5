// TimedMutexLock: an absl::MutexLock that also adds to a LockTimes how long its owner waited for
// the mutex and how long it held it, so that a coordinator can say whether a lock is what limits it
// (psync_coordinator_lock_*_seconds_total, psync_job_lock_*_seconds_total). Costs two reads of the
// steady clock and three relaxed additions per acquisition.
//
// LockTimes is thread-safe: relaxed atomic totals, read at any time (not a synchronization point).
// TimedMutexLock is a scoped lock like absl::MutexLock (Release() unlocks early); it borrows both
// pointers.
#ifndef PSYNC_SERVER_OWNER_TIMED_LOCK_H_
#define PSYNC_SERVER_OWNER_TIMED_LOCK_H_

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
  // Adds `other`'s totals to these.
  void Add(const LockTimes& other) {
    wait_ns.fetch_add(other.wait_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
    held_ns.fetch_add(other.held_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
    acquisitions.fetch_add(other.acquisitions.load(std::memory_order_relaxed),
                           std::memory_order_relaxed);
  }
};

// Nanoseconds on the steady clock (for durations only).
inline int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class ABSL_SCOPED_LOCKABLE TimedMutexLock {
 public:
  TimedMutexLock(absl::Mutex* mu, LockTimes* times) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu), times_(times) {
    const int64_t asked = SteadyNanos();
    mu_->Lock();
    acquired_ = SteadyNanos();
    times_->wait_ns.fetch_add(acquired_ - asked, std::memory_order_relaxed);
  }
  ~TimedMutexLock() ABSL_UNLOCK_FUNCTION() {
    if (!released_) Release();
  }
  // Unlocks before the end of the scope (once).
  void Release() ABSL_UNLOCK_FUNCTION() {
    const int64_t released = SteadyNanos();
    mu_->Unlock();
    released_ = true;
    times_->held_ns.fetch_add(released - acquired_, std::memory_order_relaxed);
    times_->acquisitions.fetch_add(1, std::memory_order_relaxed);
  }
  TimedMutexLock(const TimedMutexLock&) = delete;
  TimedMutexLock& operator=(const TimedMutexLock&) = delete;

 private:
  absl::Mutex* const mu_;
  LockTimes* const times_;
  int64_t acquired_ = 0;
  bool released_ = false;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_TIMED_LOCK_H_
