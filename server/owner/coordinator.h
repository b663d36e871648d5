// Coordinator: the thread-safe owner of every job: the registry of jobs and their admission (Join,
// tokens, max_jobs, max_sessions), each job's state (job.h, under the job's own lock), its
// lifecycle into a bounded history, the fencing of replicas, and the ordered delivery of what each
// decision produced (ordered_delivery.h).
//
// Every public method locks the job it works on, feeds the input to the job's tracker with the
// clock's now, records the resulting events and notices in an Effects, commits it to the delivery
// order before unlocking and delivers it after: notices to the addressed ranks' SessionSinks
// (which never block), then session closes, then events to the EventSinks. Each job has its own
// lock, so messages of different jobs are decided at once, on different threads; adding, ending
// and dropping jobs excludes all of them. Every sink sees notices and events in decision order
// (one order over all jobs). Jobs are isolated: each has its own tracker, sessions and counters; a
// job is created by its first Join and leaves by EndJob, by every rank leaving finished, or by idle
// eviction, into a bounded history (docs/reliability.md, "Job lifecycle"). Messages for a job in
// the history are FAILED_PRECONDITION naming it as ended (a Join of an evicted job starts it
// again).
//
// A rejected input leaves every job unchanged (only the job's `rejected` counter and a kRejected
// event record it). Unknown job: NOT_FOUND. Other codes: see core/job_tracker.h.
//
// Locks, in the order taken: the registry's (mu_), a job's (Job::mu, then Job::observer_mu), the
// delivery's three (ordered_delivery.h); secret_mu_ on its own. The methods are defined by concern:
// coordinator.cc (admission, messages, lifecycle), coordinator_batch.cc (node batches),
// coordinator_liveness.cc, coordinator_queries.cc, coordinator_replicas.cc (fencing, dropping).
// Thread-safe. Does not own the clock.
#ifndef PSYNC_SERVER_OWNER_COORDINATOR_H_
#define PSYNC_SERVER_OWNER_COORDINATOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
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
#include "serve/clock.h"
#include "server/core/job_tracker.h"
#include "server/core/types.h"
#include "server/observe/job_observer.h"
#include "server/owner/batch_combiner.h"
#include "server/owner/effects.h"
#include "server/owner/fan_out.h"
#include "server/owner/job.h"
#include "server/owner/job_gate.h"
#include "server/owner/job_history.h"
#include "server/owner/job_view.h"
#include "server/owner/ordered_delivery.h"
#include "server/owner/rank_message.h"
#include "server/owner/session_sink.h"
#include "server/owner/timed_lock.h"

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
  // A job with no attached session and no message for this long is evicted: it moves to the
  // history of finished jobs (state EVICTED) with a kJobEvicted event.
  absl::Duration job_idle_ttl = absl::Minutes(15);
  // Ended and evicted jobs kept, with their final status and audit (oldest dropped first).
  size_t finished_jobs_kept = 256;
  // Coordinator replicas (--etcd): which jobs this one serves, and at which epoch (job_gate.h).
  // Not owned. Null: every job is served here, at epoch 0.
  JobGate* gate = nullptr;
  // Threads, besides the delivering one, that start the writes of one decision's notices when it
  // names many streams (a release to every rank or node): each takes a share of the streams
  // (fan_out.h). 0: the delivering thread writes them all, one after the other.
  int delivery_threads = 3;
  // Threads, besides the one applying a batch, that apply a large run of its check-ins chunk by
  // chunk at once (Job::ApplyCheckinGroups): a run of at least `apply_by_chunk_min_messages`
  // messages over several chunks. 0: every run on the applying thread, group by group (the default:
  // through relays on a busy host the helpers cost more than they saved, docs/performance.md).
  int apply_threads = 0;
  size_t apply_by_chunk_min_messages = 256;
  // Ranks that named no node (JoinRequest.node) are shown in blocks of this many consecutive
  // ranks, one node each (observe::LayOutNodes).
  uint32_t node_size = observe::kDefaultNodeSize;
};

// Where a coordinator's time goes, since it started: its locks (every call that changes state takes
// its job's lock, or the lock over the set of jobs; waiting for one is contention), summed over
// every job, and the delivery of decisions, which one thread at a time does, in decision order. A
// delivering total close to the wall-clock time is a coordinator bound by its delivering thread,
// whatever its cores; each job's own lock times are in its JobStatusView.
struct LoadTimes {
  absl::Duration lock_wait;
  absl::Duration lock_held;
  uint64_t lock_acquisitions = 0;
  absl::Duration delivering;
  // Check-ins of runs applied chunk by chunk on several threads
  // (CoordinatorOptions::apply_threads), counted whether or not a slot took them.
  uint64_t checkins_by_chunk = 0;
};

// The result of EndJob: the job's final status, and whether it had already ended.
struct EndJobResult {
  JobStatusView status;
  bool already_ended = false;
};

class Coordinator {
 public:
  Coordinator(CoordinatorOptions options, serve::Clock* clock);
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
  // Records a message refused before it reached a job's tracker (a Session's bytes that do not
  // parse, a first message that is not attach, an attach without a job): `job_id`'s `rejected`
  // counter when that job is known, and a kRejected event either way. Changes nothing else.
  void RecordRejected(const std::string& job_id, const absl::Status& status)
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
  // handed out once, after unlocking. A batch of one-item check-ins only, none repeated, is applied
  // a group of equal items at a time (checkin_groups.h), with the same answers. Defined in
  // coordinator_batch.cc.
  std::vector<absl::Status> ApplyBatch(const std::string& job_id, uint64_t generation,
                                       absl::Span<const RankMessage> messages)
      ABSL_LOCKS_EXCLUDED(mu_);

  // `list_limit`: as Job::View's (a finished job's kept view is whole).
  absl::StatusOr<JobStatusView> GetJobStatus(const std::string& job_id,
                                             ViewDetail detail = ViewDetail::kStatus,
                                             size_t list_limit = SIZE_MAX) ABSL_LOCKS_EXCLUDED(mu_);
  // OK when `generation` is the job's current one; NOT_FOUND / FAILED_PRECONDITION otherwise.
  // With job tokens configured, (rank, session_id) must also be a joined rank's session
  // (PERMISSION_DENIED otherwise).
  absl::Status CheckGeneration(const std::string& job_id, uint64_t generation, core::RankId rank,
                               const std::string& session_id) ABSL_LOCKS_EXCLUDED(mu_);
  // Live jobs sorted by id, then the history of finished jobs, oldest first; only those whose
  // JobStateText is in `states` when it is not empty.
  // `detail`: of the live jobs' views (job_view.h); finished jobs' are as they were kept.
  std::vector<JobStatusView> ListJobs(absl::Span<const std::string> states = {},
                                      ViewDetail detail = ViewDetail::kStatus)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Live jobs held now (what --max_jobs bounds).
  size_t live_jobs() const ABSL_LOCKS_EXCLUDED(mu_);
  // Totals since construction; see LoadTimes.
  LoadTimes load_times() const ABSL_LOCKS_EXCLUDED(mu_);
  // See OrderedDelivery::SetDeliveredObserver: per decision with notices, the time from deciding to
  // its notices queued to their streams. Thread-safe; empty: none.
  void SetDeliveredObserver(std::function<void(absl::Duration since_decision)> observe) {
    delivery_.SetDeliveredObserver(std::move(observe));
  }

  // Ends the job: its attached sessions (of ranks that did not leave finished) are closed with
  // FAILED_PRECONDITION, a kJobEnded event records `reason`, and it moves to the history.
  // INVALID_ARGUMENT (empty job_id, reason over 256 bytes), NOT_FOUND (unknown job), the gate's
  // NotServedHere (another replica owns it), FAILED_PRECONDITION (an evicted job), and with job
  // tokens PERMISSION_DENIED / UNAUTHENTICATED as for Join. An ended job: OK, already_ended.
  absl::StatusOr<EndJobResult> EndJob(const std::string& job_id, const std::string& reason,
                                      const std::string& token) ABSL_LOCKS_EXCLUDED(mu_);

  // The rank leaves; with `finished` it completed its run: it is no longer tracked for liveness,
  // and once every rank of the generation has left finished the job ends. FAILED_PRECONDITION for
  // a stale generation or a rank that has not joined it.
  absl::Status Leave(const std::string& job_id, core::RankId rank, uint64_t generation,
                     bool finished) ABSL_LOCKS_EXCLUDED(mu_);

  // Coordinator replicas: these jobs are no longer served here (this replica lost their
  // ownership). Each one's state is dropped (not kept in the history: the new owner rebuilds it
  // from the ranks) and its attached sessions are closed with `status` (a NotServedHere). Unknown
  // jobs are skipped. Returns how many jobs were dropped.
  size_t DropJobs(absl::Span<const std::string> job_ids, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Enforces the liveness rules, and so changes state: finds stalls in every job (chunks waiting
  // past their learned deadline) and lost ranks (no session past the lease), and aborts the
  // generation of a job whose rank stayed lost past lost_rank_abort_after (its ranks get Abort).
  // Evicts jobs idle past job_idle_ttl (kJobEvicted). Records a kStall / kRankLost event for each
  // new finding and returns those events and the evictions. Called
  // periodically by the server's inspector thread (tests call it themselves).
  std::vector<core::Event> EnforceLiveness() ABSL_LOCKS_EXCLUDED(mu_);

  // One (step, chunk) of a job, with its learned deadline. NOT_FOUND for an unknown job (the
  // gate's NotServedHere for one another replica owns, here and in Trace, Audit and GetJobStatus);
  // see core::JobTracker::ChunkAt for the rest (and `list_limit`).
  absl::StatusOr<core::ChunkSnapshot> GetChunkStatus(const std::string& job_id, core::Step step,
                                                     core::ChunkId chunk, absl::Duration* deadline,
                                                     size_t list_limit = SIZE_MAX)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A Chrome trace of the job's steps [first, last] from the events held in memory (see
  // observe/trace_export.h). NOT_FOUND for an unknown job.
  absl::StatusOr<std::string> Trace(const std::string& job_id, core::Step first, core::Step last)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Audit records of one job, oldest first. NOT_FOUND for an unknown job. With replicas,
  // `earlier_owners` (when not null) receives the parts of the job's audit its earlier owners
  // published (JobGate::EarlierOwnerAudits; an ended job's as they were when it ended).
  absl::StatusOr<std::vector<observe::SyncAudit>> Audit(
      const std::string& job_id, std::vector<std::string>* earlier_owners = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The audit totals of `job_id` while this coordinator holds it at ownership `epoch`; nullopt
  // otherwise. Not fenced: what a replica publishes as its own part (server/ha/audit_ledger.h).
  // Waits for a message being applied: asked once the gate refuses the job's messages (its last
  // word), it counts every release this coordinator decided.
  std::optional<observe::AuditTotals> AuditTotalsAt(const std::string& job_id, uint64_t epoch)
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
  using JobMap = absl::flat_hash_map<std::string, std::unique_ptr<Job>>;

  // Runs `input` on the job's tracker under the job's lock (records events and counts, routes the
  // deliveries), then delivers them after unlocking. Returns `input`'s status.
  absl::Status Apply(
      const std::string& job_id,
      const std::function<absl::Status(core::JobTracker&, absl::Time, core::Decisions*)>& input)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Applies the queued batches `tasks` (BatchTasks, coordinator_batch.cc) of `job` one after the
  // other under one acquisition of its lock, committing each one's decisions in turn and queueing
  // their events for the observer (Job::ObserveLater). Run by the job's combiner.
  void ApplyRound(Job& job, absl::Span<BatchCombiner::Task* const> tasks)
      ABSL_SHARED_LOCKS_REQUIRED(mu_) ABSL_LOCKS_EXCLUDED(job.mu, job.observer_mu);
  // ApplyBatch with a Leave among the messages (it may end the job): under mu_ exclusively.
  std::vector<absl::Status> ApplyBatchWithLeaves(const std::string& job_id, uint64_t generation,
                                                 absl::Span<const RankMessage> messages,
                                                 Effects* effects) ABSL_LOCKS_EXCLUDED(mu_);
  // A refused message naming `job_id`, under mu_ held exclusively (nothing else decides for the
  // job meanwhile): counted on `job` (taking its lock) when it is live, else as for no live job.
  void RecordRejectionOf(Job* job, const std::string& job_id, const absl::Status& status,
                         absl::Time now, Effects* effects) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job `it` leaves the coordinator (ended or evicted) into the history; its sessions not of
  // finished ranks are closed with FAILED_PRECONDITION (after unlocking).
  void FinishJob(JobMap::iterator it, JobEndKind kind, const std::string& reason, absl::Time now,
                 Effects* effects) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why there is no live job `job_id`: FAILED_PRECONDITION naming it as ended or evicted when it is
  // in the history; the gate's NotServedHere when another replica owns it; NOT_FOUND otherwise
  // (`hint` ends the message).
  absl::Status NoLiveJob(const std::string& job_id, absl::string_view hint) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // NoLiveJob, asking the gate for another owner only when `ask_gate`.
  absl::Status EndedOrUnknown(const std::string& job_id, absl::string_view hint,
                              bool ask_gate) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Why a message of `job_id` finds no live job here: the gate's NotServedHere when this
  // coordinator does not serve the job (the client goes where it is served), else NoLiveJob.
  absl::Status NotHere(const std::string& job_id, absl::string_view hint = "") const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The live job `job_id`, or null.
  Job* FindJob(const std::string& job_id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // OK when this coordinator serves `job` now at the epoch it holds it at (always, without a
  // gate); else the gate's NotServedHere. Decided under the job's lock, just before the tracker
  // may release.
  absl::Status CheckServed(const Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(job.mu);
  // A read of `job_id` (`job`: its live state here, or null) is fenced like a message: OK when
  // this coordinator may answer it from what it holds (it serves the job, or no replica owns it);
  // else UNAVAILABLE, with the owner's redirect when one is known and, for a live job, what was
  // last known here, named as such. Takes the job's lock when refusing.
  absl::Status FenceRead(const std::string& job_id, Job* job) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Ends the Sessions attached to `job` (but those of ranks that left finished) with `status`,
  // through `effects`, and forgets them.
  void CloseSessionsLocked(Job& job, const absl::Status& status, Effects* effects)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_, job.mu);
  // Erases the live job `it` from jobs_, keeping its lock times in left_jobs_lock_times_.
  void EraseJobLocked(JobMap::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the live job `it` without a history entry; its sessions are closed with `status`.
  void DropJobLocked(JobMap::iterator it, const absl::Status& status, Effects* effects)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK, PERMISSION_DENIED (job not configured) or UNAUTHENTICATED (wrong token).
  absl::Status CheckToken(const core::RankPlan& plan) const;
  // Random bytes (hex) that make session ids unguessable.
  std::string NewSecret() ABSL_LOCKS_EXCLUDED(secret_mu_);
  LivenessRules liveness_rules() const {
    return {options_.rank_lease, options_.lost_rank_abort_after};
  }

  // Constant after construction.
  const CoordinatorOptions options_;
  serve::Clock* const clock_;

  // The registry of jobs: exclusively to add, end or drop one; shared to work on one (with its
  // lock).
  mutable absl::Mutex mu_;
  // Of mu_ taken exclusively (a job's messages time its own lock, Job::lock_times; queries, which
  // take the locks shared or briefly, are not timed), and the job locks' times of the jobs that
  // left. load_times() adds the live jobs' to them, so the messages' hot path touches only their
  // job's totals.
  LockTimes lock_times_;
  LockTimes left_jobs_lock_times_;
  JobMap jobs_ ABSL_GUARDED_BY(mu_);
  size_t sessions_ ABSL_GUARDED_BY(mu_) = 0;  // attached, over all jobs
  JobHistory history_ ABSL_GUARDED_BY(mu_);
  absl::Mutex secret_mu_ ABSL_ACQUIRED_AFTER(mu_);
  absl::BitGen bitgen_ ABSL_GUARDED_BY(secret_mu_);
  // The event log and the delivery order, over every job; its locks are taken after mu_ and a
  // job's.
  OrderedDelivery delivery_;
  // The helper threads of large check-in runs (CoordinatorOptions::apply_threads), shared by every
  // job; and how ApplyRound asks for them.
  FanOut apply_fan_out_;
  const Job::ApplyByChunk apply_by_chunk_;
  std::atomic<uint64_t> checkins_by_chunk_{0};  // LoadTimes::checkins_by_chunk
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_COORDINATOR_H_
