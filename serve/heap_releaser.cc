#include "serve/heap_releaser.h"

#include <malloc.h>

namespace psync::serve {

HeapReleaser::HeapReleaser(absl::Duration interval) {
  if (interval <= absl::ZeroDuration()) return;
  thread_ = std::thread([this, interval] {
    while (!stop_.WaitForNotificationWithTimeout(interval)) malloc_trim(0);
  });
}

HeapReleaser::~HeapReleaser() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

}  // namespace psync::serve
