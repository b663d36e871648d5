// AgentWaits: the wait histograms of psync-agent processes (agent/agent_metrics.h) and the
// coordinator's AgentSession queue wait (psync_agent_stream_down_wait_seconds), read from their
// GET /metrics, summed over processes and differenced over a measured window, in psync-bench's
// JSON.
//
// Scrape() fetches one agent's /metrics over plain HTTP on 127.0.0.1; Parse() reads the text
// (exposed for tests). A WaitHistogram holds cumulative counts by bucket upper bound (seconds), so
// its percentiles are bucket bounds: Json() renders {"count":..,"mean_us":..,"p50_le_us":..,
// "p99_le_us":..} where p50_le_us is the smallest bound at or under which half the observations
// lie (0 when there are none; -1 when it is the +Inf bucket). Pure except Scrape;
// thread-compatible.
#ifndef PSYNC_BENCH_AGENT_WAITS_H_
#define PSYNC_BENCH_AGENT_WAITS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psync::bench {

struct WaitHistogram {
  std::map<double, uint64_t> cumulative;  // upper bound (s; +Inf included) -> observations <= it
  double sum_s = 0;
  uint64_t count = 0;

  void Add(const WaitHistogram& other, int sign = 1);
  // The smallest bound with at least q (0..1) of the observations at or under it.
  double QuantileBound(double q) const;
  std::string Json() const;
};

struct AgentWaits {
  // psync_agent_upstream_wait_seconds, psync_agent_fanout_seconds,
  // psync_agent_down_wait_seconds and psync_agent_down_write_seconds by label; the coordinator's
  // psync_agent_stream_down_wait_seconds and psync_agent_stream_down_write_seconds.
  WaitHistogram up_from_rank, up_from_agent, fanout_to_rank, fanout_to_agent, down_to_rank,
      down_to_agent, write_to_rank, write_to_agent, coordinator_down, coordinator_write;
  // The coordinator's psync_decision_delivery_seconds.
  WaitHistogram coordinator_delivery;
  // psync_agent_directive_age_seconds by label: a release's age when the agent read it, had
  // queued it to its local Sessions, and (a relay) to a downstream agent.
  WaitHistogram age_read, age_queued_to_ranks, age_queued_to_agent;

  void Add(const AgentWaits& other, int sign = 1);
  // The agents' histograms: {"up_from_rank":..,"up_from_agent":..,"fanout_to_rank":..,
  // "fanout_to_agent":..,"down_to_rank":..,"down_to_agent":..,"write_to_rank":..,
  // "write_to_agent":..,"directive_age_read":..,"directive_age_queued_to_ranks":..,
  // "directive_age_queued_to_agent":..}.
  std::string Json() const;
};

AgentWaits ParseAgentWaits(absl::string_view metrics_text);
absl::StatusOr<AgentWaits> ScrapeAgentWaits(int http_port);

}  // namespace psync::bench

#endif  // PSYNC_BENCH_AGENT_WAITS_H_
