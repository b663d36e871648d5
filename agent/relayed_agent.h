// RelayedAgent: the relay's end of one downstream node agent's AgentSession (agent/relay_hub.h):
// the writer of what goes down to that agent, over the coordinator's merging queue
// (serve/agent_down_queue.h: acks, notices for several ranks in one entry, closures, lazy answers
// as acked_through). Shared by the stream's reactor and the hub; once the stream is done
// (writer().Detach()), whatever is added is dropped.
//
// The hub stages each share for the agent (Stage) and a fan-out thread drains them into the queue
// (Drain): shares staged while an earlier one waits for its thread leave with it
// (agent/staged_adds.h).
//
// Thread-safe (the StreamWriter's contract; drains of one agent run one at a time, in the order
// called). The queue is not bounded: what a relay queues for an agent is the answers and notices
// of that agent's own ranks.
#ifndef PSYNC_AGENT_RELAYED_AGENT_H_
#define PSYNC_AGENT_RELAYED_AGENT_H_

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/staged_adds.h"
#include "agent/stats.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "serve/agent_down_queue.h"
#include "serve/stream_writer.h"

namespace psync::agent {

class RelayedAgent {
 public:
  using Writer = serve::StreamWriter<v1::AgentUp, v1::AgentDown, serve::AgentDownQueue>;
  using Staged = StagedAdds<serve::AgentDownQueue>;

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

  // Stages one share; true when the caller must arrange one Drain() (agent/staged_adds.h).
  bool Stage(Staged::Add add) { return staged_.Stage(std::move(add)); }

  // Adds every staged share to the queue in one Add (they leave in as few messages as the queue
  // allows), pending lazy answers flushed with them (a relay holds none of its own), then runs
  // each share's `queued`. Returns how many shares it added.
  size_t Drain() ABSL_LOCKS_EXCLUDED(drain_mu_) {
    // Without fan-out threads two threads may drain at once: the one that took first adds first.
    absl::MutexLock lock(&drain_mu_);
    std::vector<Staged::Add> adds = staged_.Take();
    if (adds.empty()) return 0;
    writer_.Add([&](serve::AgentDownQueue& q) {
      for (Staged::Add& a : adds) a.add(q);
      q.FlushLazyAcks();
    });
    for (Staged::Add& a : adds) {
      if (a.queued) a.queued();
    }
    return adds.size();
  }

 private:
  Writer writer_;
  Staged staged_;
  absl::Mutex drain_mu_;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_RELAYED_AGENT_H_
