#include "agent/agent_metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace psync::agent {
namespace {

// The counters scraped as psync_agent_<name>_total, with their help.
struct CounterSpec {
  const char* name;
  uint64_t AgentStats::*field;
  const char* help;
};
const CounterSpec kCounters[] = {
    {"local_messages", &AgentStats::local_messages,
     "Staged, skip and sync_done messages from local ranks."},
    {"local_checkins", &AgentStats::local_checkins, "Check-ins (staged items) in them."},
    {"upstream_batches", &AgentStats::upstream_batches,
     "AgentBatch messages written up (resends included)."},
    {"lazy_batches", &AgentStats::lazy_batches, "Of those, sent with lazy_ack."},
    {"upstream_messages", &AgentStats::upstream_messages,
     "AgentUp messages written up (attach, detach, batch)."},
    {"upstream_writer_wakeups", &AgentStats::upstream_writer_wakeups,
     "Times the upstream writer was woken to see what is due."},
    {"upstream_wake_requests", &AgentStats::upstream_wake_requests,
     "Times the upstream writer was asked to see what is due (an attach, a detach, a message "
     "that makes the queue due or starts its window)."},
    {"upstream_reads", &AgentStats::upstream_reads,
     "AgentDown messages read from the streams up (the coordinator's, or a relay's)."},
    {"merged_checkins", &AgentStats::merged_checkins,
     "MergedStaged entries written (one check-in of several ranks)."},
    {"merged_sync_dones", &AgentStats::merged_sync_dones,
     "MergedSyncDone entries written (one SyncDoneBatch of several ranks)."},
    {"notices_received", &AgentStats::notices_received,
     "AgentNotice entries received (one notice for several ranks)."},
    {"notices_delivered", &AgentStats::notices_delivered,
     "Notices handed to local Sessions (one per rank)."},
    {"notices_unrouted", &AgentStats::notices_unrouted,
     "Notices for a rank with no local Session (dropped)."},
    {"duplicate_directives_dropped", &AgentStats::duplicate_directives_dropped,
     "Re-sent directives a local Session already had."},
    {"local_acks", &AgentStats::local_acks, "Acks of their own written to local ranks."},
    {"local_lazy_acks", &AgentStats::local_lazy_acks,
     "Local messages answered by a later message's acked_through."},
    {"upstreams_started", &AgentStats::upstreams_started,
     "Upstreams started: streams carrying local Sessions, at most one per replica."},
    {"reconnects", &AgentStats::reconnects, "Upstream streams after the first that got an answer."},
    {"batches_resent", &AgentStats::batches_resent,
     "Unacknowledged batches written again after a reconnect."},
    {"local_rejected", &AgentStats::local_rejected, "Local messages the agent refused itself."},
    {"redirects", &AgentStats::redirects, "Jobs moved to the owner a replica named."},
    {"rotations", &AgentStats::rotations, "Jobs moved to the next replica of the list."},
    {"replicas_lost", &AgentStats::replicas_lost,
     "Upstream streams that could not reconnect and ended their ranks' Sessions."},
    {"relayed_attaches", &AgentStats::relayed_attaches,
     "Attaches of downstream agents relayed up."},
    {"relayed_batches", &AgentStats::relayed_batches, "Batches of downstream agents relayed up."},
    {"relay_merged_batches", &AgentStats::relay_merged_batches,
     "Of those, how many went up inside another's AgentBatch."},
    {"relay_refused", &AgentStats::relay_refused,
     "Messages of downstream agents the relay refused itself."},
    {"relay_notices", &AgentStats::relay_notices,
     "AgentNotice entries written down to downstream agents."},
};

}  // namespace

absl::StatusOr<std::unique_ptr<AgentMetrics>> AgentMetrics::Create(AgentCounters* counters) {
  std::unique_ptr<AgentMetrics> m(new AgentMetrics(counters));
  if (absl::Status s = m->Register(); !s.ok()) return s;
  AgentMetrics* self = m.get();
  m->registry_.AddCollector([self] { self->Collect(); });
  return m;
}

absl::Status AgentMetrics::Register() {
  for (const CounterSpec& spec : kCounters) {
    auto family =
        registry_.AddCounter(absl::StrCat("psync_agent_", spec.name, "_total"), spec.help, {});
    if (!family.ok()) return family.status();
    mirrored_.push_back({spec.field, (*family)->WithLabels({})});
  }
  auto sessions = registry_.AddGauge("psync_agent_local_sessions",
                                     "Local rank Sessions open now (attached or attaching).", {});
  if (!sessions.ok()) return sessions.status();
  local_sessions_ = (*sessions)->WithLabels({});
  auto relayed = registry_.AddGauge("psync_agent_relayed_agents",
                                    "Downstream agents' AgentSessions open now.", {});
  if (!relayed.ok()) return relayed.status();
  relayed_agents_ = (*relayed)->WithLabels({});

  auto up = registry_.AddHistogram(
      "psync_agent_upstream_wait_seconds",
      "Per AgentBatch handed to the writer of the stream up: how long its oldest message waited "
      "in the agent (from: rank, a local rank's message; agent, a downstream agent's batch).",
      {"from"}, metrics::QueueWaitBuckets());
  if (!up.ok()) return up.status();
  auto down = registry_.AddHistogram(
      "psync_agent_down_wait_seconds",
      "Per message written down: how long its oldest content waited in the stream's queue "
      "before the write started (to: rank, a local Session; agent, a downstream agent).",
      {"to"}, metrics::QueueWaitBuckets());
  if (!down.ok()) return down.status();
  auto write = registry_.AddHistogram(
      "psync_agent_down_write_seconds",
      "Per message written down: how long its write took, from its start until the stream took "
      "it (it waits while the reader's flow-control window is full; to: rank, a local Session; "
      "agent, a downstream agent).",
      {"to"}, metrics::QueueWaitBuckets());
  if (!write.ok()) return write.status();
  auto fanout = registry_.AddHistogram(
      "psync_agent_fanout_seconds",
      "Per message read from the stream up: the time to hand all of it down (answers and "
      "notices queued to every local Session or downstream agent it names).",
      {"to"}, metrics::QueueWaitBuckets());
  if (!fanout.ok()) return fanout.status();
  auto age = registry_.AddHistogram(
      "psync_agent_directive_age_seconds",
      "Per directive (one AgentNotice entry): its age, from the coordinator deciding the release "
      "(SyncDirective.released_unix_micros, the coordinator's clock) to this agent's clock, when "
      "it was read from the stream up (at: read), when it had been queued to every local Session "
      "it names (queued_to_ranks), and by a relay when it had been queued to each downstream "
      "agent (queued_to_agent, one per agent).",
      {"at"}, metrics::QueueWaitBuckets());
  if (!age.ok()) return age.status();
  counters_->directive_age_read = (*age)->WithLabels({"read"});
  counters_->directive_age_queued_to_ranks = (*age)->WithLabels({"queued_to_ranks"});
  counters_->directive_age_queued_to_agent = (*age)->WithLabels({"queued_to_agent"});
  counters_->fanout_ranks = (*fanout)->WithLabels({"rank"});
  counters_->fanout_agents = (*fanout)->WithLabels({"agent"});
  counters_->upstream_wait_ranks = (*up)->WithLabels({"rank"});
  counters_->upstream_wait_agents = (*up)->WithLabels({"agent"});
  counters_->down_wait_ranks = (*down)->WithLabels({"rank"});
  counters_->down_wait_agents = (*down)->WithLabels({"agent"});
  counters_->down_write_ranks = (*write)->WithLabels({"rank"});
  counters_->down_write_agents = (*write)->WithLabels({"agent"});
  return absl::OkStatus();
}

void AgentMetrics::Collect() {
  const AgentStats s = counters_->Snapshot();
  // Counters mirror totals kept by the agent: raised to them (they never go down).
  for (const Mirrored& m : mirrored_) {
    m.counter->Add(static_cast<double>(s.*m.field) - m.counter->Value());
  }
  local_sessions_->Set(static_cast<double>(s.local_sessions));
  relayed_agents_->Set(static_cast<double>(s.relayed_agents));
}

}  // namespace psync::agent
