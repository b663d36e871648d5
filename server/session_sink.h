// SessionSink: where the coordinator sends notices for one attached rank (one Session stream).
//
// Send and Close never block: implementations queue and write asynchronously. Thread-safe. The
// coordinator holds sinks by shared_ptr; a sink outlives the stream it writes to, and calls after
// the stream ended are dropped.
#ifndef PSYNC_SERVER_SESSION_SINK_H_
#define PSYNC_SERVER_SESSION_SINK_H_

#include "absl/status/status.h"
#include "server/core/types.h"

namespace psync::server {

class SessionSink {
 public:
  virtual ~SessionSink() = default;
  // Queues `notice` for the rank.
  virtual void Send(const core::Notice& notice) = 0;
  // Ends the stream with `status` once queued notices are written.
  virtual void Close(const absl::Status& status) = 0;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_SESSION_SINK_H_
