// AgentStats: what a node agent counts, to show that merging happens and nothing is lost or
// repeated. AgentCounters: the live, lock-free counters behind it, and the wait histograms the
// agent's metrics own (agent/agent_metrics.h). Thread-safe.
#ifndef PSYNC_AGENT_STATS_H_
#define PSYNC_AGENT_STATS_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "serve/metrics/metric.h"

namespace psync::agent {

struct AgentStats {
  uint64_t local_sessions = 0;    // local Sessions open now (attached or attaching)
  uint64_t local_messages = 0;    // staged / skip / sync_done messages from local ranks
  uint64_t local_checkins = 0;    // check-ins (staged items) in them
  uint64_t upstream_batches = 0;  // AgentBatch messages written to the coordinator (resends too)
  // Those of them sent with lazy_ack (every message an asynchronous report of its rank): the
  // coordinator may answer them on a later message.
  uint64_t lazy_batches = 0;
  uint64_t upstream_messages = 0;  // every AgentUp written (attach, detach, batch)
  // Times the upstream writer was woken to see what is due: by an attach, a detach, a local
  // message that makes the queue due or starts its window, or the window's end. A message held by
  // the window behind others does not wake it.
  uint64_t upstream_writer_wakeups = 0;
  // Times the writer was asked to look (a Wake: an attach, a detach, a message that makes the
  // queue due or starts its window), counted where it is asked, so exactly: a writer asked again
  // while it is taking the queue in may look once more than it was asked, and a window's end
  // makes it look unasked.
  uint64_t upstream_wake_requests = 0;
  uint64_t upstream_reads = 0;     // AgentDown messages read from the streams up
  uint64_t merged_checkins = 0;    // MergedStaged entries written (one check-in of several ranks)
  uint64_t merged_sync_dones = 0;  // MergedSyncDone entries written (one SyncDone of several ranks)
  uint64_t notices_received = 0;   // AgentNotice entries received (one notice for several ranks)
  uint64_t notices_delivered = 0;  // notices handed to local Sessions (one per rank)
  uint64_t notices_unrouted = 0;   // notices for a rank with no local Session (dropped)
  uint64_t duplicate_directives_dropped = 0;  // re-sent directives a local Session already had
  // Answers to local messages: Acks of their own, and accepted lazy_ack messages answered by a
  // later message's acked_through (no message of their own).
  uint64_t local_acks = 0;
  uint64_t local_lazy_acks = 0;
  // Upstreams started: the AgentSession streams that carry local Sessions, at most one per
  // replica, opened for the single listed target at start and for any other replica when a local
  // Session first attaches there (a relay opens none for the replicas it only relays to).
  uint64_t upstreams_started = 0;
  uint64_t reconnects = 0;      // upstream streams after the first that got an answer
  uint64_t batches_resent = 0;  // unacknowledged batches written again after a reconnect
  // Local messages the agent refused itself (bytes that do not parse, a first message that is not
  // attach, a second attach, no kind); refusals of the coordinator are counted there.
  uint64_t local_rejected = 0;
  // Several replicas (AgentOptions::target lists more than one): jobs moved to the owner a
  // replica's OwnerRedirect named, jobs moved to the next replica of the list (unreachable, or
  // not serving the job), and upstream streams that could not reconnect and ended their ranks'
  // local Sessions so that the ranks join again elsewhere.
  uint64_t redirects = 0;
  uint64_t rotations = 0;
  uint64_t replicas_lost = 0;
  // Relaying (agent/relay_hub.h): downstream agents' AgentSessions open now, the attaches and
  // batches they sent up through this agent, the messages the relay refused itself (a rank not
  // attached through the stream it came on), and the AgentNotice entries written down to them.
  uint64_t relayed_agents = 0;
  uint64_t relayed_attaches = 0;
  uint64_t relayed_batches = 0;
  uint64_t relay_merged_batches = 0;  // of those, how many went up inside another's AgentBatch
  uint64_t relay_refused = 0;
  uint64_t relay_notices = 0;
};

class AgentCounters {
 public:
  std::atomic<uint64_t> local_sessions{0};
  std::atomic<uint64_t> local_messages{0};
  std::atomic<uint64_t> local_checkins{0};
  std::atomic<uint64_t> upstream_batches{0};
  std::atomic<uint64_t> lazy_batches{0};
  std::atomic<uint64_t> upstream_messages{0};
  std::atomic<uint64_t> upstream_writer_wakeups{0};
  std::atomic<uint64_t> upstream_wake_requests{0};
  std::atomic<uint64_t> upstream_reads{0};
  std::atomic<uint64_t> merged_checkins{0};
  std::atomic<uint64_t> merged_sync_dones{0};
  std::atomic<uint64_t> notices_received{0};
  std::atomic<uint64_t> notices_delivered{0};
  std::atomic<uint64_t> notices_unrouted{0};
  std::atomic<uint64_t> duplicate_directives_dropped{0};
  std::atomic<uint64_t> local_acks{0};
  std::atomic<uint64_t> local_lazy_acks{0};
  std::atomic<uint64_t> upstreams_started{0};
  std::atomic<uint64_t> reconnects{0};
  std::atomic<uint64_t> batches_resent{0};
  std::atomic<uint64_t> local_rejected{0};
  std::atomic<uint64_t> redirects{0};
  std::atomic<uint64_t> rotations{0};
  std::atomic<uint64_t> replicas_lost{0};
  std::atomic<uint64_t> relayed_agents{0};
  std::atomic<uint64_t> relayed_attaches{0};
  std::atomic<uint64_t> relayed_batches{0};
  std::atomic<uint64_t> relay_merged_batches{0};
  std::atomic<uint64_t> relay_refused{0};
  std::atomic<uint64_t> relay_notices{0};

  // How long messages wait in the agent (agent/agent_metrics.h says what each one times). Set
  // once, before anything is observed, by AgentMetrics::Create; null where no one did (the
  // agent's parts tested alone), and then nothing is observed.
  metrics::Histogram* upstream_wait_ranks = nullptr;
  metrics::Histogram* upstream_wait_agents = nullptr;
  metrics::Histogram* down_wait_ranks = nullptr;
  metrics::Histogram* down_wait_agents = nullptr;
  metrics::Histogram* down_write_ranks = nullptr;
  metrics::Histogram* down_write_agents = nullptr;
  metrics::Histogram* fanout_ranks = nullptr;
  metrics::Histogram* fanout_agents = nullptr;
  // How old a release is at the agent's hops (agent/directive_age.h): read from the stream up, and
  // queued to local Sessions or to a downstream agent.
  metrics::Histogram* directive_age_read = nullptr;
  metrics::Histogram* directive_age_queued_to_ranks = nullptr;
  metrics::Histogram* directive_age_queued_to_agent = nullptr;

  static void Observe(metrics::Histogram* histogram, absl::Duration waited) {
    if (histogram != nullptr) histogram->Observe(absl::ToDoubleSeconds(waited));
  }
  // Observes into `histogram` (may be null) how long its scope took.
  class ScopedTimer {
   public:
    explicit ScopedTimer(metrics::Histogram* histogram)
        : histogram_(histogram),
          start_(histogram != nullptr ? absl::Now() : absl::InfinitePast()) {}
    ~ScopedTimer() { Observe(histogram_, absl::Now() - start_); }
    ScopedTimer(const ScopedTimer&) = delete;
    ScopedTimer& operator=(const ScopedTimer&) = delete;

   private:
    metrics::Histogram* const histogram_;
    const absl::Time start_;
  };

  AgentStats Snapshot() const {
    AgentStats s;
    s.local_sessions = local_sessions.load();
    s.local_messages = local_messages.load();
    s.local_checkins = local_checkins.load();
    s.upstream_batches = upstream_batches.load();
    s.lazy_batches = lazy_batches.load();
    s.upstream_messages = upstream_messages.load();
    s.upstream_writer_wakeups = upstream_writer_wakeups.load();
    s.upstream_wake_requests = upstream_wake_requests.load();
    s.upstream_reads = upstream_reads.load();
    s.merged_checkins = merged_checkins.load();
    s.merged_sync_dones = merged_sync_dones.load();
    s.notices_received = notices_received.load();
    s.notices_delivered = notices_delivered.load();
    s.notices_unrouted = notices_unrouted.load();
    s.duplicate_directives_dropped = duplicate_directives_dropped.load();
    s.local_acks = local_acks.load();
    s.local_lazy_acks = local_lazy_acks.load();
    s.upstreams_started = upstreams_started.load();
    s.reconnects = reconnects.load();
    s.batches_resent = batches_resent.load();
    s.local_rejected = local_rejected.load();
    s.redirects = redirects.load();
    s.rotations = rotations.load();
    s.replicas_lost = replicas_lost.load();
    s.relayed_agents = relayed_agents.load();
    s.relayed_attaches = relayed_attaches.load();
    s.relayed_batches = relayed_batches.load();
    s.relay_merged_batches = relay_merged_batches.load();
    s.relay_refused = relay_refused.load();
    s.relay_notices = relay_notices.load();
    return s;
  }
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_STATS_H_
