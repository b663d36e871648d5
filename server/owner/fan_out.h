// FanOut: one piece of work split into slices that run on the calling thread and on a few threads
// of its own at once; Run returns once every slice has run. The coordinator delivers a release
// with it: the writes to many streams (each a serialization and a system call, about 15 us of CPU)
// run on several cores instead of one after the other.
//
// Thread-safe: concurrent Runs share the helper threads (a slice waits for a free one). Never call
// Run from a slice. The destructor joins the helpers.
#ifndef PSYNC_SERVER_OWNER_FAN_OUT_H_
#define PSYNC_SERVER_OWNER_FAN_OUT_H_

#include <cstddef>
#include <memory>

#include "absl/functional/function_ref.h"
#include "serve/blocking_pool.h"

namespace psync::server {

class FanOut {
 public:
  // `helpers` threads besides the caller's; 0 runs everything on the caller's thread.
  explicit FanOut(int helpers);

  int helpers() const { return helpers_; }

  // Calls fn(begin, end) for consecutive slices that cover [0, n): as many slices as there are
  // threads (helpers + 1), but no slice shorter than `min_slice` (so a small n is one call on the
  // caller's thread). The caller runs the first slice. Returns when every slice returned.
  void Run(size_t n, size_t min_slice, absl::FunctionRef<void(size_t, size_t)> fn);

 private:
  const int helpers_;
  std::unique_ptr<serve::BlockingPool> pool_;  // null without helpers
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_FAN_OUT_H_
