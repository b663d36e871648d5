// CallsInFlight: counts the agent's server-side calls (local Sessions, forwarded unary calls) whose
// reactor is not yet destroyed, so that Agent::Drain can wait for the last of them before the
// Router and the Upstreams they use are destroyed. gRPC's Server::Shutdown already waits for every
// reactor's OnDone; this states that order in the agent's own synchronization, where a reader (and
// ThreadSanitizer, which cannot see inside Debian's uninstrumented gRPC) can check it.
//
// A reactor holds a Token from Enter() as its first member, so the Token is released last, once
// the reactor touched everything it uses. Thread-safe; the Tokens must not outlive the object.
#ifndef PSYNC_AGENT_CALLS_IN_FLIGHT_H_
#define PSYNC_AGENT_CALLS_IN_FLIGHT_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace psync::agent {

class CallsInFlight {
 public:
  // Released when destroyed (or moved from into another Token). Move-only.
  class Token {
   public:
    Token(Token&& other) noexcept : calls_(other.calls_) { other.calls_ = nullptr; }
    Token& operator=(Token&&) = delete;
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;
    ~Token() {
      if (calls_ != nullptr) calls_->Exit();
    }

   private:
    friend class CallsInFlight;
    explicit Token(CallsInFlight* calls) : calls_(calls) {}
    CallsInFlight* calls_;
  };

  Token Enter() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ++count_;
    return Token(this);
  }

  // Blocks until no Token is held.
  void AwaitNone() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int64_t* count) { return *count == 0; }, &count_));
  }

  int64_t count() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return count_;
  }

 private:
  void Exit() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    --count_;
  }

  mutable absl::Mutex mu_;
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_CALLS_IN_FLIGHT_H_
