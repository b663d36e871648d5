// Job: one job's state in the owner (the Coordinator), and what is done to it under its lock: its
// readiness tracker (core::JobTracker), attached sessions, counters, liveness (detached and lost
// ranks, ranks that left finished) and observer (stalls, stragglers, audit).
//
// Thread-safety: `mu` guards the job's state; `observer_mu` the observer, taken after `mu`. A
// node's batch queues its committed events for the observer under `mu` (ObserveLater) and they
// are observed after its notices are delivered, so that neither the job's next decision nor the
// batch's own release waits for the observer (straggler scores, deadlines, the audit); the
// observer is only read through CaughtUpObserver, which first observes what is queued, in the
// order it was committed.
// The Coordinator owns every Job and decides when each lock is taken (coordinator.h); a Job's
// methods state the locks they need. Notices, events and closes go into an Effects, delivered by
// the caller after unlocking.
#ifndef PSYNC_SERVER_OWNER_JOB_H_
#define PSYNC_SERVER_OWNER_JOB_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/core/job_tracker.h"
#include "server/core/types.h"
#include "server/observe/job_observer.h"
#include "server/owner/attached_sessions.h"
#include "server/owner/batch_combiner.h"
#include "server/owner/checkin_groups.h"
#include "server/owner/effects.h"
#include "server/owner/fan_out.h"
#include "server/owner/job_view.h"
#include "server/owner/rank_message.h"
#include "server/owner/session_sink.h"
#include "server/owner/timed_lock.h"

namespace psync::server {

// When a joined rank without a Session is lost (a kRankLost event, the job DEGRADED), and when it
// aborts the job's generation.
struct LivenessRules {
  absl::Duration rank_lease;
  absl::Duration lost_rank_abort_after;
};

class Job {
 public:
  Job(std::unique_ptr<core::JobTracker> tracker, const observe::ObserverOptions& observer_options,
      uint64_t ownership_epoch)
      : tracker(std::move(tracker)), observer(observer_options), epoch(ownership_epoch) {}
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Decisions for a call into the tracker: a release to every member of a chunk comes as one
  // delivery (core::Decisions::deliver_to_members_whole), which QueueNotices routes.
  static core::Decisions NewDecisions() {
    core::Decisions decisions;
    decisions.deliver_to_members_whole = true;
    return decisions;
  }
  // Moves decisions.events (emptied) to the end of effects->events, counts and observes them
  // (ObserveFrom) and queues decisions.deliveries (QueueNotices).
  void Record(core::Decisions& decisions, Effects* effects) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu)
      ABSL_LOCKS_EXCLUDED(observer_mu);
  // Applies one Stage / Skip / SyncDone message of a node's batch: appends its events to
  // effects->events (a check-in or SyncDone may join a record of an earlier message there, when
  // decisions.merge_rank_events) and queues its notices. The caller counts and observes the events
  // (CountFrom, ObserveEvents) once no later message may join them. A kLeave message is INTERNAL
  // (see Leave).
  absl::Status ApplyMessage(uint64_t generation, const RankMessage& message, absl::Time now,
                            core::Decisions& decisions, Effects* effects)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // ApplyMessage for each of `messages` in order, statuses[i] answering messages[i]; consecutive
  // one-item SyncDone messages that carry the same item (the messages of one
  // AgentBatch.merged_sync_dones entry) are recorded together where each is the common report
  // (core::JobTracker::SyncDonesInSlots), with the same answers, events and notices in the same
  // order. No kLeave among them.
  void ApplyMessages(uint64_t generation, absl::Span<const RankMessage> messages, absl::Time now,
                     core::Decisions& decisions, Effects* effects,
                     absl::Span<absl::Status> statuses) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // ApplyMessage for a group of one-item check-in messages that carry the same item, one per
  // rank of `ranks` (core::JobTracker::StageMerged); statuses[i] is the message of ranks[i]'s.
  void ApplyMergedCheckin(uint64_t generation, const core::StagedItem& item,
                          absl::Span<const core::RankId> ranks, absl::Time now,
                          core::Decisions& decisions, Effects* effects,
                          absl::Span<absl::Status> statuses) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // How runs of a batch's check-ins are applied (ApplyCheckinGroups).
  struct ApplyByChunk {
    FanOut* fan_out = nullptr;  // null, or no helpers: group by group on the caller's thread
    size_t min_messages = 256;  // fewer messages in the runs: group by group
  };
  // Whether `messages` check-ins are enough to apply chunk by chunk at once.
  static bool WorthApplyingByChunk(const ApplyByChunk& by_chunk, size_t messages) {
    return by_chunk.fan_out != nullptr && by_chunk.fan_out->helpers() > 0 &&
           messages >= by_chunk.min_messages;
  }
  // A run of one-item check-ins of one batch (checkin_groups.h) and its answers: statuses[i]
  // answers message i of the run.
  struct CheckinRun {
    uint64_t generation = 0;
    const CheckinGroups* groups = nullptr;
    absl::Span<absl::Status> statuses;
  };
  // ApplyMergedCheckin for every group of `runs` (of one batch, or of several batches of
  // different streams, which no order binds). When they hold by_chunk.min_messages messages or more
  // over several chunks, they are applied chunk by chunk on by_chunk.fan_out's threads at once
  // (core::JobTracker::StageInSlots), then, on the caller's thread, the ranks that need more than
  // their slot and each touched chunk's release. The answers, state and counts are those of the
  // groups applied one after the other (different chunks' check-ins touch disjoint state until
  // the release, which waits for all of them either way); only the order of the events differs:
  // the chunks' records in chunk order, then the others' answers, then the releases.
  // Returns how many check-ins were applied chunk by chunk (0: group by group).
  size_t ApplyCheckinGroups(absl::Span<const CheckinRun> runs, absl::Time now,
                            const ApplyByChunk& by_chunk, core::Decisions& decisions,
                            Effects* effects) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // CountFrom, then ObserveEvents of the same events under the observer's lock.
  void ObserveFrom(size_t first_event, const Effects& effects) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu)
      ABSL_LOCKS_EXCLUDED(observer_mu);
  // Counts the tracker's events in effects.events from `first_event` on (they stay there);
  // kRejected events are RecordRejection's.
  void CountFrom(size_t first_event, const Effects& effects) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Hands the tracker's events to the observer (kRejected events are not its), after those
  // queued by ObserveLater.
  void ObserveEvents(absl::Span<const core::Event> events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(observer_mu);
  // Queues committed events for the observer (in the order of the calls; call under `mu`, so
  // that it is the order the job decided them in). Empty or null: nothing.
  void ObserveLater(std::shared_ptr<const std::vector<core::Event>> events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_LOCKS_EXCLUDED(observer_mu);
  // The observer, once it observed every event queued by ObserveLater.
  observe::JobObserver& CaughtUpObserver() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(observer_mu);
  // Routes `deliveries` to the attached sessions, stamping directives with the ownership epoch; a
  // delivery to a chunk's members as a whole goes transport by transport through the chunk's
  // routes (AttachedSessions::RoutesTo). A rank without a session gets its pending notices when
  // it attaches.
  void QueueNotices(const std::vector<core::Delivery>& deliveries, Effects* effects)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A refused message: the `rejected` counter and a kRejected event.
  void RecordRejection(const absl::Status& status, absl::Time now, Effects* effects)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Brings detached_since in line with the tracker's joined ranks after `rank` joined (all of them
  // when the join started a new generation).
  void TrackDetached(core::RankId rank, uint64_t generation_before, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The rank leaves (Coordinator::Leave). Sets *ends when it was the last rank of the generation
  // to leave finished: the caller then ends the job. FAILED_PRECONDITION for a stale generation or
  // a rank that has not joined it; changes nothing then.
  absl::Status Leave(core::RankId rank, uint64_t generation, bool leaves_finished, bool* ends)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Ranks detached past the lease become lost (a kRankLost event each, once); a rank lost past
  // lost_rank_abort_after aborts the generation.
  void EnforceLiveness(const LivenessRules& rules, absl::Time now, Effects* effects)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_LOCKS_EXCLUDED(observer_mu);
  // Chunks of a running job waiting past their learned deadline: a kStall event for each new one.
  void FindStalls(absl::Time now, Effects* effects) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu)
      ABSL_LOCKS_EXCLUDED(observer_mu);
  // The Sessions of ranks that did not leave finished are closed with `status` (through
  // `effects`); every Session is forgotten. Returns how many were attached.
  size_t CloseSessions(const absl::Status& status, Effects* effects)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // What GetJobStatus reports, in as much `detail` (job_view.h).
  // `node_size`: ranks per block of ranks that named no node (observe::LayOutNodes).
  // `list_limit`: each chunk's lists hold at most so many entries (core::JobTracker::Snapshot).
  JobStatusView View(absl::Time now, uint32_t node_size, ViewDetail detail = ViewDetail::kStatus,
                     size_t list_limit = SIZE_MAX) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu)
      ABSL_LOCKS_EXCLUDED(observer_mu);
  // observe::LayOutNodes of `nodes` over `world_size` ranks, laid out again only when `nodes`,
  // the world size or `node_size` changed since the last call.
  const observe::NodeLayout& NodesLaidOut(uint32_t world_size, uint32_t node_size) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  mutable absl::Mutex mu;
  // Queues the job's batches so that one thread applies those that arrive together under one
  // acquisition of mu (Coordinator::ApplyBatch).
  BatchCombiner combiner;
  LockTimes lock_times;  // of mu, by the messages that change the job's state
  std::unique_ptr<core::JobTracker> tracker ABSL_GUARDED_BY(mu);
  AttachedSessions sessions ABSL_GUARDED_BY(mu);
  JobCounters counters ABSL_GUARDED_BY(mu);
  mutable absl::Mutex observer_mu ABSL_ACQUIRED_AFTER(mu);
  // Read and written through CaughtUpObserver (mutable: catching up changes nothing observable).
  mutable observe::JobObserver observer ABSL_GUARDED_BY(observer_mu);
  mutable std::deque<std::shared_ptr<const std::vector<core::Event>>> unobserved
      ABSL_GUARDED_BY(observer_mu);
  // Joined ranks of the current generation without a Session, and since when.
  absl::flat_hash_map<core::RankId, absl::Time> detached_since ABSL_GUARDED_BY(mu);
  absl::flat_hash_set<core::RankId> lost ABSL_GUARDED_BY(mu);
  // The node each rank named when it last joined (JoinRequest.node); ranks that named none are
  // not listed. Changed through NameNode only.
  absl::flat_hash_map<core::RankId, std::string> nodes ABSL_GUARDED_BY(mu);
  // `rank` runs on `node` ("" for none named): kept in `nodes`, and the node layout is laid out
  // again for the next view when it changed.
  void NameNode(core::RankId rank, const std::string& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Ranks of the current generation that left finished.
  absl::flat_hash_set<core::RankId> finished ABSL_GUARDED_BY(mu);
  // NodesLaidOut's last layout and what it was laid out for; none after `nodes` changed.
  struct NodeLayoutCache {
    uint32_t world_size = 0;
    uint32_t node_size = 0;
    observe::NodeLayout layout;
  };
  mutable std::optional<NodeLayoutCache> node_layout ABSL_GUARDED_BY(mu);
  // The last message, join, attach or detach; with no session, idle since then.
  absl::Time last_activity ABSL_GUARDED_BY(mu);
  // The ownership epoch this replica serves the job at (0 without a gate); stamped on its
  // directives.
  const uint64_t epoch;
};

// A refused message for no live job: a kRejected event naming `job_id`.
void RecordRejectionWithoutJob(const std::string& job_id, const absl::Status& status,
                               absl::Time now, Effects* effects);

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_JOB_H_
