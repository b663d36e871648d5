// PSYNC_RETURN_IF_ERROR(expr): evaluates `expr` (an absl::Status) and returns it from the calling
// function when it is not OK. Abseil (20220623) offers no such macro publicly.
#ifndef PSYNC_WORKER_STATUS_MACROS_H_
#define PSYNC_WORKER_STATUS_MACROS_H_

#include "absl/status/status.h"

#define PSYNC_RETURN_IF_ERROR(expr)                \
  do {                                             \
    absl::Status psync_status_ = (expr);           \
    if (!psync_status_.ok()) return psync_status_; \
  } while (false)

#endif  // PSYNC_WORKER_STATUS_MACROS_H_
