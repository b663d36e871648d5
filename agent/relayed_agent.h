// RelayedAgent: the relay's end of one downstream node agent's AgentSession (agent/relay_hub.h):
// the writer of what goes down to that agent, over the coordinator's merging queue
// (serve/agent_down_queue.h: acks, notices for several ranks in one entry, closures, lazy answers
// as acked_through). Shared by the stream's reactor and the hub; once the stream is done
// (writer().Detach()), whatever is added is dropped.
//
// Thread-safe (the StreamWriter's contract). The queue is not bounded: what a relay queues for an
// agent is the answers and notices of that agent's own ranks.
#ifndef PSYNC_AGENT_RELAYED_AGENT_H_
#define PSYNC_AGENT_RELAYED_AGENT_H_

#include "agent/stats.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "serve/agent_down_queue.h"
#include "serve/stream_writer.h"

namespace psync::agent {

class RelayedAgent {
 public:
  using Writer = serve::StreamWriter<v1::AgentUp, v1::AgentDown, serve::AgentDownQueue>;

  // `reactor` is not owned; `down_waits` and `down_writes` (either may be null) get each write's
  // queue wait and its time, and must outlive the writer.
  RelayedAgent(Writer::Reactor* reactor, metrics::Histogram* down_waits,
               metrics::Histogram* down_writes = nullptr)
      : writer_(reactor, "node agent") {
    writer_.SetWaitObserver(metrics::SecondsObserver(down_waits));
    writer_.SetWriteObserver(metrics::SecondsObserver(down_writes));
  }
  RelayedAgent(const RelayedAgent&) = delete;
  RelayedAgent& operator=(const RelayedAgent&) = delete;

  Writer& writer() { return writer_; }

 private:
  Writer writer_;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_RELAYED_AGENT_H_
