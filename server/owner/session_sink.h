// SessionSink: where the coordinator sends notices for one attached rank (one Session stream).
//
// Send and Close never block: implementations queue and write asynchronously. Thread-safe. The
// coordinator holds sinks by shared_ptr; a sink outlives the stream it writes to, and calls after
// the stream ended are dropped.
#ifndef PSYNC_SERVER_OWNER_SESSION_SINK_H_
#define PSYNC_SERVER_OWNER_SESSION_SINK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/core/types.h"

namespace psync::server {

// The transport shared by several sinks (a node agent's stream carries the sessions of several
// ranks; a Session's stream is the transport of its one rank). The coordinator addresses a
// decision's notices to transports with the ranks they are for, not rank by rank: it corks the
// transport, hands it each notice with its ranks, and uncorks it, so that the transport writes them
// as one message and does the per-notice work (conversion, locking) once for the many ranks of a
// release. Cork and Uncork nest: what is queued meanwhile goes out once every Cork has had its
// Uncork. Never blocks. Thread-safe.
class NoticeBatcher {
 public:
  virtual ~NoticeBatcher() = default;
  virtual void Cork() = 0;
  virtual void Uncork() = 0;
  // Queues `notice` for each of `ranks` of `job_id`, in order: the same as the Send of each of
  // those ranks' sinks, every one of which was attached with this batcher as its batcher() (the
  // coordinator delivers in decision order, so a sink it replaced is not closed before the
  // notices it was addressed).
  virtual void SendToRanks(const std::string& job_id, absl::Span<const core::RankId> ranks,
                           const core::Notice& notice) = 0;
};

class SessionSink {
 public:
  virtual ~SessionSink() = default;
  // Queues `notice` for the rank.
  virtual void Send(const core::Notice& notice) = 0;
  // Ends the stream with `status` once queued notices are written.
  virtual void Close(const absl::Status& status) = 0;
  // The transport this sink's notices go through, or null (the default: the coordinator calls
  // Send for each notice). Lives as long as the sink, and is the same for its whole life.
  virtual NoticeBatcher* batcher() { return nullptr; }
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_SESSION_SINK_H_
