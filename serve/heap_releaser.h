// HeapReleaser: hands the heap's free pages back to the system every `interval` (glibc's
// malloc_trim). glibc keeps what its arenas freed mapped, so a daemon whose per-step state is
// allocated and dropped step after step keeps its peak resident set, and with several gRPC threads
// allocating from separate arenas, that peak grows with fragmentation. Costs one pass over the
// arenas' free lists per interval, on its own thread (docs/performance.md has the measured cost).
//
// Thread-safety: construct and destroy from one thread; it owns its thread and joins it on
// destruction. An interval of zero (or less) starts nothing.
#ifndef PSYNC_SERVE_HEAP_RELEASER_H_
#define PSYNC_SERVE_HEAP_RELEASER_H_

#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace psync::serve {

class HeapReleaser {
 public:
  explicit HeapReleaser(absl::Duration interval);
  ~HeapReleaser();
  HeapReleaser(const HeapReleaser&) = delete;
  HeapReleaser& operator=(const HeapReleaser&) = delete;

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace psync::serve

#endif  // PSYNC_SERVE_HEAP_RELEASER_H_
