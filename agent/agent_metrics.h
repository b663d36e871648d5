// AgentMetrics: psync-agent's Prometheus metrics (GET /metrics when --http_listen is set): what
// the agent counts (AgentStats, read at each scrape) and how long messages wait inside it, both
// ways, so that a relay tier's share of a release can be told from the coordinator's:
//
//   psync_agent_upstream_wait_seconds{from}: per AgentBatch handed to the writer of the stream
//     up, how long its oldest message waited in the agent since it arrived. from="rank": a local
//     rank's message (held by the flush window, or behind the previous write); from="agent": a
//     downstream agent's batch this agent relays (behind the previous write).
//   psync_agent_down_wait_seconds{to}: per message written down, how long its oldest content
//     (a notice, an answer) waited in that stream's queue before the write started. to="rank": a
//     local rank's Session; to="agent": a downstream agent's AgentSession.
//   psync_agent_down_write_seconds{to}: per message written down, how long the write took from
//     its start until the stream took it (a reader that does not keep up fills its flow-control
//     window, and the write waits); to as above.
//   psync_agent_fanout_seconds{to}: per message read from the stream up, the time to hand all of
//     it down (to="rank": a node agent's local Sessions; to="agent": a relay's downstream agents).
//
// Create registers the families and points `counters`' wait histograms at them; the agent's
// parts observe through those pointers. Thread-safe; owns its registry; `counters` must outlive
// it.
#ifndef PSYNC_AGENT_AGENT_METRICS_H_
#define PSYNC_AGENT_AGENT_METRICS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "agent/stats.h"
#include "serve/metrics/registry.h"

namespace psync::agent {

class AgentMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<AgentMetrics>> Create(AgentCounters* counters);
  AgentMetrics(const AgentMetrics&) = delete;
  AgentMetrics& operator=(const AgentMetrics&) = delete;

  metrics::Registry* registry() { return &registry_; }

 private:
  explicit AgentMetrics(AgentCounters* counters) : counters_(counters) {}
  absl::Status Register();
  void Collect();

  AgentCounters* const counters_;
  metrics::Registry registry_;
  struct Mirrored {
    uint64_t AgentStats::*field;
    metrics::Counter* counter;
  };
  std::vector<Mirrored> mirrored_;
  metrics::Gauge* local_sessions_ = nullptr;
  metrics::Gauge* relayed_agents_ = nullptr;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_AGENT_METRICS_H_
