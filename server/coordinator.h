// Coordinator: the thread-safe owner of every job's readiness state machine (core::JobTracker),
// the registry of attached sessions, per-job counters and the event log.
//
// Every public method locks one mutex, feeds the input to the job's tracker with the clock's now,
// records the resulting events, and, after unlocking, hands notices to the addressed ranks'
// SessionSinks (which never block). Jobs are isolated: each has its own tracker, sessions and
// counters; a job is created by its first Join.
//
// A rejected input leaves every job unchanged (only the job's `rejected` counter and a kRejected
// event record it). Unknown job: NOT_FOUND. Other codes: see core/job_tracker.h.
// Thread-safe. Does not own the clock.
#ifndef PSYNC_SERVER_COORDINATOR_H_
#define PSYNC_SERVER_COORDINATOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/clock.h"
#include "server/core/job_tracker.h"
#include "server/core/types.h"
#include "server/event_log.h"
#include "server/observe/job_observer.h"
#include "server/rank_message.h"
#include "server/session_sink.h"

namespace psync::server {

struct CoordinatorOptions {
  core::TrackerOptions tracker;
  // Jobs the coordinator holds at once; a Join for a new job beyond it is RESOURCE_EXHAUSTED.
  uint32_t max_jobs = 1024;
  // Events kept in memory (oldest dropped first).
  size_t event_log_capacity = 100000;
  observe::ObserverOptions observer;
  // A joined rank without an attached Session for longer than this is lost: a kRankLost event
  // names it and the job is DEGRADED.
  absl::Duration rank_lease = absl::Seconds(10);
  // A rank lost for this long (since its session ended) aborts the generation, so every other rank
  // leaves its collectives instead of hanging; ranks then join again.
  absl::Duration lost_rank_abort_after = absl::Seconds(30);
  // When non-empty, only these jobs may join, each with its token (job_id -> token); rendezvous
  // calls must then present a joined rank's session id.
  absl::flat_hash_map<std::string, std::string> job_tokens;
  // Attached Session streams at once, over all jobs; more are RESOURCE_EXHAUSTED.
  size_t max_sessions = 65536;
};

// Receives events as they are recorded (after the coordinator's lock is released). Must not block.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void OnEvents(const std::vector<core::Event>& events) = 0;
};

struct JobCounters {
  uint64_t checkins = 0;
  uint64_t duplicate_checkins = 0;
  uint64_t releases = 0;
  uint64_t syncs_done = 0;
  uint64_t skipped_steps = 0;
  uint64_t violations = 0;
  uint64_t rejected = 0;
};

struct JobStatusView {
  core::JobSnapshot snapshot;
  JobCounters counters;
  uint32_t sessions_connected = 0;
  uint64_t stalls = 0;
  std::vector<observe::StragglerScore> stragglers;  // highest score first
  std::vector<absl::Duration> deadlines;            // per chunk
  observe::AuditTotals audit;
  std::vector<core::RankId> lost_ranks;  // sorted; non-empty makes a running job DEGRADED
};

class Coordinator {
 public:
  Coordinator(CoordinatorOptions options, Clock* clock);
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Validates and joins; see core::JobTracker::Join.
  absl::StatusOr<core::JoinResult> Join(const core::RankPlan& plan) ABSL_LOCKS_EXCLUDED(mu_);

  // Attaches `sink` as the session of (job, rank). A session already attached for that rank is
  // closed with ABORTED ("superseded"). Returns the notices the rank must hold now (pending
  // directives, or the abort of its generation); the caller writes them after its attach Ack.
  absl::StatusOr<std::vector<core::Notice>> Attach(const std::string& job_id, core::RankId rank,
                                                   uint64_t generation,
                                                   const std::string& session_id,
                                                   std::shared_ptr<SessionSink> sink)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Removes `sink` if it is still the session of (job, rank).
  void Detach(const std::string& job_id, core::RankId rank, const SessionSink* sink)
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status Stage(const std::string& job_id, core::RankId rank, uint64_t generation,
                     absl::Span<const core::StagedItem> items) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Skip(const std::string& job_id, core::RankId rank, uint64_t generation,
                    core::Step step, const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SyncDone(const std::string& job_id, core::RankId rank, uint64_t generation,
                        absl::Span<const core::SyncDoneItem> items) ABSL_LOCKS_EXCLUDED(mu_);

  // Applies several ranks' messages of one job (a node agent's merged batch) in order under one
  // lock, each exactly as Stage / Skip / SyncDone of that rank with `generation` would; returns
  // one status per message (one rank's rejected message does not affect another's). Notices are
  // handed out once, after unlocking. Defined in coordinator_batch.cc.
  std::vector<absl::Status> ApplyBatch(const std::string& job_id, uint64_t generation,
                                       absl::Span<const RankMessage> messages)
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<JobStatusView> GetJobStatus(const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);
  // OK when `generation` is the job's current one; NOT_FOUND / FAILED_PRECONDITION otherwise.
  // With job tokens configured, (rank, session_id) must also be a joined rank's session
  // (PERMISSION_DENIED otherwise).
  absl::Status CheckGeneration(const std::string& job_id, uint64_t generation, core::RankId rank,
                               const std::string& session_id) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<JobStatusView> ListJobs() ABSL_LOCKS_EXCLUDED(mu_);

  // Enforces the liveness rules, and so changes state: finds stalls in every job (chunks waiting
  // past their learned deadline) and lost ranks (no session past the lease), and aborts the
  // generation of a job whose rank stayed lost past lost_rank_abort_after (its ranks get Abort).
  // Records a kStall / kRankLost event for each new finding and returns those events. Called
  // periodically by the server's inspector thread (tests call it themselves).
  std::vector<core::Event> EnforceLiveness() ABSL_LOCKS_EXCLUDED(mu_);

  // One (step, chunk) of a job, with its learned deadline. NOT_FOUND for an unknown job; see
  // core::JobTracker::ChunkAt for the rest.
  absl::StatusOr<core::ChunkSnapshot> GetChunkStatus(const std::string& job_id, core::Step step,
                                                     core::ChunkId chunk, absl::Duration* deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A Chrome trace of the job's steps [first, last] from the events held in memory (see
  // observe/trace_export.h). NOT_FOUND for an unknown job.
  absl::StatusOr<std::string> Trace(const std::string& job_id, core::Step first, core::Step last)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Audit records of one job, oldest first. NOT_FOUND for an unknown job.
  absl::StatusOr<std::vector<observe::SyncAudit>> Audit(const std::string& job_id)
      ABSL_LOCKS_EXCLUDED(mu_);

  // `sink` receives every event recorded from now on until removed. Not owned. If `backlog` is not
  // null it receives the events still held in memory. Returns the index of the first live event:
  // the sink may be handed a few events with smaller indices (also in the backlog) and should drop
  // them.
  uint64_t AddEventSink(EventSink* sink, std::vector<core::Event>* backlog)
      ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveEventSink(EventSink* sink) ABSL_LOCKS_EXCLUDED(mu_);

  // The first `limit` events recorded so far with index >= `from`, oldest first (indices count
  // from 0 since start; older ones may have been dropped). `next` receives the index after the
  // last returned event (where to continue), or the index the next recorded event will get when
  // none is returned; `end`, when not null, that index. Copies at most `limit` events under the
  // lock.
  std::vector<core::Event> EventsSince(uint64_t from, uint64_t* next, size_t limit = SIZE_MAX,
                                       uint64_t* end = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Job {
    explicit Job(std::unique_ptr<core::JobTracker> t) : tracker(std::move(t)) {}
    std::unique_ptr<core::JobTracker> tracker;
    absl::flat_hash_map<core::RankId, std::shared_ptr<SessionSink>> sessions;
    JobCounters counters;
    observe::JobObserver observer;
    // Joined ranks of the current generation without a Session, and since when.
    absl::flat_hash_map<core::RankId, absl::Time> detached_since;
    absl::flat_hash_set<core::RankId> lost;
  };
  struct Outgoing {
    // Each addressed sink with its notice; deliveries of one notice share it (see Record).
    std::vector<std::pair<std::shared_ptr<SessionSink>, std::shared_ptr<const core::Notice>>>
        notices;
    std::vector<core::Event> events;  // decided, not yet in the log (CommitEvents)
    EventLog::Batch committed;        // the same events, numbered and logged: for the event sinks
  };

  // Runs `input` on the job's tracker under the lock (records events and counts, routes the
  // deliveries), then delivers them after unlocking. Returns `input`'s status.
  absl::Status Apply(
      const std::string& job_id,
      const std::function<absl::Status(core::JobTracker&, absl::Time, core::Decisions*)>& input)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Record(Job& job, core::Decisions& decisions, Outgoing* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordRejection(const std::string& job_id, Job* job, const absl::Status& status,
                       absl::Time now, Outgoing* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AppendEvent(core::Event event, Outgoing* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves out->events into the log as one batch (out->committed); call once per Outgoing, at the
  // end of the locked scope that decided it, so that the log's order is the order of decisions.
  void CommitEvents(Outgoing* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JobStatusView View(const Job& job, absl::Time now) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // OK, PERMISSION_DENIED (job not configured) or UNAUTHENTICATED (wrong token).
  absl::Status CheckToken(const core::RankPlan& plan) const;
  // Random bytes (hex) that make session ids unguessable.
  std::string NewSecret() ABSL_LOCKS_EXCLUDED(secret_mu_);
  // Brings detached_since in line with the tracker's joined ranks after `rank` joined (all of them
  // when the join started a new generation).
  static void TrackDetached(Job& job, core::RankId rank, uint64_t generation_before,
                            absl::Time now);
  void EnforceLivenessOf(Job& job, absl::Time now, Outgoing* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands notices to sessions and events to event sinks; call without holding mu_.
  void Deliver(Outgoing& out) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const CoordinatorOptions options_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  EventLog events_ ABSL_GUARDED_BY(mu_);
  size_t sessions_ ABSL_GUARDED_BY(mu_) = 0;  // attached, over all jobs
  absl::Mutex secret_mu_ ABSL_ACQUIRED_AFTER(mu_);
  absl::BitGen bitgen_ ABSL_GUARDED_BY(secret_mu_);
  // Event sinks have their own lock so that delivery happens outside mu_.
  absl::Mutex sinks_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::vector<EventSink*> event_sinks_ ABSL_GUARDED_BY(sinks_mu_);
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_COORDINATOR_H_
