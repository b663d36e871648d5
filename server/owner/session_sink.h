// SessionSink: where the coordinator sends notices for one attached rank (one Session stream).
//
// Send and Close never block: implementations queue and write asynchronously. Thread-safe. The
// coordinator holds sinks by shared_ptr; a sink outlives the stream it writes to, and calls after
// the stream ended are dropped.
#ifndef PSYNC_SERVER_OWNER_SESSION_SINK_H_
#define PSYNC_SERVER_OWNER_SESSION_SINK_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/core/types.h"

namespace psync::server {

// The transport shared by several sinks (a node agent's stream carries the sessions of several
// ranks). The coordinator corks it while it hands out the notices of one decision, so that the
// transport can write them as one message. Cork and Uncork nest: what is queued meanwhile goes
// out once every Cork has had its Uncork. Never blocks. Thread-safe.
class SessionSink;

class NoticeBatcher {
 public:
  virtual ~NoticeBatcher() = default;
  virtual void Cork() = 0;
  virtual void Uncork() = 0;
  // The same as sink->Send(notice) for each of `sinks` in order, each of which has this batcher
  // as its batcher(); a transport overrides it to do the per-notice work (conversion, locking)
  // once for the many ranks of a release.
  virtual void SendToEach(absl::Span<SessionSink* const> sinks, const core::Notice& notice);
};

class SessionSink {
 public:
  virtual ~SessionSink() = default;
  // Queues `notice` for the rank.
  virtual void Send(const core::Notice& notice) = 0;
  // Ends the stream with `status` once queued notices are written.
  virtual void Close(const absl::Status& status) = 0;
  // The transport this sink shares with other sinks, or null (the default: a stream of its own).
  // Lives as long as the sink.
  virtual NoticeBatcher* batcher() { return nullptr; }
};

inline void NoticeBatcher::SendToEach(absl::Span<SessionSink* const> sinks,
                                      const core::Notice& notice) {
  for (SessionSink* sink : sinks) sink->Send(notice);
}

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_SESSION_SINK_H_
