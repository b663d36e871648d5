// WaitUntil: polls a condition that another thread (a stream's reader or writer, a server) makes
// true, every 5 ms, for at most `timeout`. For tests: a state reached in the background is waited
// for, never slept for. Thread-safe; `done` runs on the calling thread.
#ifndef PSYNC_CLIENT_TESTING_WAIT_UNTIL_H_
#define PSYNC_CLIENT_TESTING_WAIT_UNTIL_H_

#include <functional>

#include "absl/time/time.h"

namespace psync::testing {

// True once `done` holds; false if it still does not after `timeout`.
bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(20));

}  // namespace psync::testing

#endif  // PSYNC_CLIENT_TESTING_WAIT_UNTIL_H_
