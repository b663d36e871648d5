#include "server/owner/fan_out.h"

#include <algorithm>

#include "absl/synchronization/mutex.h"

namespace psync::server {

FanOut::FanOut(int helpers)
    : helpers_(std::max(helpers, 0)),
      pool_(helpers_ > 0 ? std::make_unique<serve::BlockingPool>(helpers_) : nullptr) {}

void FanOut::Run(size_t n, size_t min_slice, absl::FunctionRef<void(size_t, size_t)> fn) {
  const size_t slices =
      std::min<size_t>(static_cast<size_t>(helpers_) + 1, n / std::max<size_t>(min_slice, 1));
  if (slices <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  // Slice s is [n * s / slices, n * (s + 1) / slices).
  const auto begin = [n, slices](size_t s) { return n * s / slices; };
  // A mutex and a count rather than absl::BlockingCounter: the same wait, and one that thread
  // sanitizers see (Debian's Abseil is not instrumented; tests/fuzz/tsan annotates absl::Mutex).
  absl::Mutex mu;
  size_t running = slices - 1;
  for (size_t s = 1; s < slices; ++s) {
    pool_->Run([&, s] {
      fn(begin(s), begin(s + 1));
      absl::MutexLock lock(&mu);
      --running;
    });
  }
  fn(0, begin(1));
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](size_t* left) { return *left == 0; }, &running));
}

}  // namespace psync::server
