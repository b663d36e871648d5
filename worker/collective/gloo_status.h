// Turns the exceptions Gloo throws into absl::Status, so that no exception
// leaves the Gloo backend.
//
// Mapping: a rendezvous store failure keeps the store's own status; a Gloo
// I/O error that reports a timeout is DEADLINE_EXCEEDED; any other Gloo I/O
// error (connection refused, reset or closed by the peer) is UNAVAILABLE;
// Gloo's internal checks (EnforceNotMet, InvalidOperationException) and any
// other exception are INTERNAL. The message starts with `what`, the action
// that failed.
//
// Thread-safety: pure functions.
#ifndef PSYNC_WORKER_COLLECTIVE_GLOO_STATUS_H_
#define PSYNC_WORKER_COLLECTIVE_GLOO_STATUS_H_

#include <exception>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gloo/common/error.h"

namespace psync {
namespace worker {

// Thrown by code called from inside Gloo (the rendezvous store adapter) to
// carry an absl::Status through Gloo's stack.
class GlooStatusError : public gloo::IoException {
 public:
  explicit GlooStatusError(absl::Status status)
      : gloo::IoException(std::string(status.message())), status_(std::move(status)) {}

  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

// Converts the exception `error` (as caught by `catch (...)`) to a non-OK
// status whose message starts with `what`.
absl::Status GlooExceptionToStatus(absl::string_view what, std::exception_ptr error);

// Runs `fn` and returns OK, or the status of the exception it threw.
template <typename Fn>
absl::Status RunGloo(absl::string_view what, Fn&& fn) {
  try {
    std::forward<Fn>(fn)();
  } catch (...) {
    return GlooExceptionToStatus(what, std::current_exception());
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COLLECTIVE_GLOO_STATUS_H_
