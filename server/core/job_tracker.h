// JobTracker: the readiness state machine of one job. Pure and deterministic: inputs (joins,
// check-ins, skips, sync-dones) and the current time in, decisions (notices to ranks, events) out.
// No threads, no I/O, no clock reads.
//
// Guarantees, for every generation of the job:
//  * No early release: a (step, chunk) is released only once the plan is complete (every rank
//    joined) and every declared contributor of the chunk staged that step.
//  * Exactly once: each (generation, step, chunk) is released at most once; its SyncDirective is
//    addressed once to every member of the chunk's sync groups. NoticesToHold() lets a reconnecting
//    session receive the directives it has not acknowledged with SyncDone (and its skips).
//  * Recovery: a rank that joins with a Resume (its step, check-ins and executed syncs) lets a
//    coordinator that lost its state rebuild the same decisions; directives go only to members
//    that have not executed the sync.
//  * Steps: a rank stages step s+1 only after it reported SyncDone for every chunk it syncs at
//    step s, or every rank skipped step s. A skip needs every rank; a rank that stages a step that
//    another rank skips (or the reverse) is a violation, and the generation is aborted.
//
// Errors: a rejected input returns a non-OK status whose message names the field and the allowed
// range, and leaves the state unchanged (it may still append a kViolation event to `out`, e.g. for
// a conflicting duplicate). Codes: INVALID_ARGUMENT malformed input; FAILED_PRECONDITION wrong
// state (stale generation, not joined, step not reached, SyncDone before the directive, plan
// conflict); OUT_OF_RANGE step outside the retained window; ALREADY_EXISTS conflicting duplicate;
// ABORTED the generation was aborted (join again); PERMISSION_DENIED wrong session id.
//
// Thread-compatible: the owner serializes calls.
#ifndef PSYNC_SERVER_CORE_JOB_TRACKER_H_
#define PSYNC_SERVER_CORE_JOB_TRACKER_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/core/dense_rank_map.h"
#include "server/core/plan.h"
#include "server/core/step_state.h"
#include "server/core/types.h"

namespace psync::core {

struct TrackerOptions {
  PlanLimits limits;
  // Finished steps kept so that late duplicates get the decision already made.
  uint32_t history_steps = 16;
  // Items per StagedBatch / SyncDoneBatch.
  uint32_t max_batch_items = 4096;
  // Characters of a SkipStep reason.
  uint32_t max_reason_length = 256;
};

enum class JobState { kForming, kRunning, kAborted };
const char* JobStateName(JobState state);

struct JoinResult {
  uint64_t generation = 0;
  std::string session_id;
  Step next_step = 0;
  bool reconnect = false;  // same incarnation joined again
  bool resumed = false;    // the plan's resume was applied (see RankPlan::resume)
  // The latest generation the tracker knows was aborted (its own aborts, or learned from a resume's
  // restarted_after): the rank's run began after it.
  uint64_t restarted_after = 0;
};

struct ChunkSnapshot {
  ChunkId chunk = 0;
  Step step = 0;
  std::string state;  // IDLE, WAITING, RELEASED (ChunkAt also: SYNCED, SKIPPED)
  std::vector<Contributor> staged;
  std::vector<absl::Duration> staged_after;  // ChunkAt only: first check-in -> this one
  std::vector<Contributor> missing;  // SnapshotLists::kAll (kHoldingBack: missing_by_optimizer)
  absl::Duration waiting;
  std::vector<RankId> sync_pending;
  // Contributors that staged `step` / have not, and members that have not reported SyncDone
  // (RELEASED only), whether or not the lists above are filled, or filled only up to a limit.
  uint32_t staged_count = 0;
  uint32_t missing_count = 0;
  uint32_t sync_pending_count = 0;
  // SnapshotLists::kHoldingBack only, for a WAITING or RELEASED chunk: the chunk's members
  // (sorted), the ranks its release goes to.
  std::vector<RankId> members;
  // SnapshotLists::kHoldingBack only, for a WAITING chunk, in place of `missing`: the ranks that
  // have not staged the chunk with each optimizer (sorted), by optimizer name; the same
  // contributors as `missing`, a rank's optimizers in the same order, without a copy of an
  // optimizer's name per contributor.
  struct MissingOfOptimizer {
    std::string optimizer;
    std::vector<RankId> ranks;
  };
  std::vector<MissingOfOptimizer> missing_by_optimizer;
};

// Which lists a JobSnapshot's chunks carry (for the chunks past `lists_after`).
enum class SnapshotLists {
  kAll,          // staged, missing and sync_pending
  kHoldingBack,  // only who holds a chunk back: missing_by_optimizer of a WAITING chunk,
                 // sync_pending of a RELEASED one, and their members; nothing for an IDLE chunk
};

struct JobSnapshot {
  std::string job_id;
  uint64_t generation = 0;
  JobState state = JobState::kForming;
  uint32_t world_size = 0;
  uint32_t num_chunks = 0;
  uint32_t ranks_joined = 0;
  Step min_rank_step = 0;
  // Steps whose state the tracker holds now (bounded by the history window behind the slowest
  // rank and the steps ranks are at or were released ahead).
  uint32_t steps_held = 0;
  std::vector<ChunkSnapshot> chunks;
  std::string abort_reason;
};

class JobTracker {
 public:
  JobTracker(std::string job_id, TrackerOptions options);
  // Chunk steps point into the tracker (optimizer_ids_): neither copied nor moved.
  JobTracker(const JobTracker&) = delete;
  JobTracker& operator=(const JobTracker&) = delete;

  // Joins `plan.rank` (plan already validated with ValidateRankPlan, plan.job_id == job_id()).
  // Same incarnation again: a reconnect, answered with the same generation and session (the plan
  // must be the same). A new incarnation of a joined rank, or any join after an abort, starts a
  // new generation; ranks of the old one get an AbortNotice.
  // `secret` (may be empty) is appended to a newly issued session id so that ids cannot be
  // guessed; the owner passes fresh random bytes, tests pass a fixed string.
  absl::StatusOr<JoinResult> Join(const RankPlan& plan, absl::Time now, Decisions* out,
                                  absl::string_view secret = "");

  // Checks that a session may attach as (rank, generation, session_id): INVALID_ARGUMENT for an
  // empty session_id or a rank outside the world, FAILED_PRECONDITION for another generation
  // (CheckGeneration) or a rank that has not joined it, PERMISSION_DENIED for a session id that is
  // not the one issued to the rank.
  absl::Status CheckAttach(RankId rank, uint64_t generation, absl::string_view session_id) const;
  // OK for the current generation; otherwise FAILED_PRECONDITION saying whether `generation` is
  // stale (older) or in the future (never issued), and the current one.
  absl::Status CheckGeneration(uint64_t generation) const;

  absl::Status Stage(RankId rank, uint64_t generation, absl::Span<const StagedItem> items,
                     absl::Time now, Decisions* out);
  // One check-in of several ranks (a node agent's merged check-in): for each of `ranks` in order,
  // statuses[i] is what Stage(ranks[i], generation, {item}) returns when called rank after rank,
  // and the state, notices and events are the same, with one difference: when the group's
  // check-ins complete the chunk, its release is decided once after the last rank, so the release
  // event also follows the group's later duplicates and rejections. A rank in the common case
  // (joined, at item.step, a declared contributor, not staged yet, the step neither skipped nor
  // voted to skip) costs a slot lookup and an insert (4 or more consecutive ranks in the common
  // case, one check of them all and one loop of inserts), and the group's fresh check-ins join one
  // record when out->merge_rank_events; any other rank is judged by Stage itself.
  // `statuses` has ranks.size() entries.
  void StageMerged(uint64_t generation, const StagedItem& item, absl::Span<const RankId> ranks,
                   absl::Time now, Decisions* out, absl::Span<absl::Status> statuses);
  // StageMerged in two parts, so that an owner can apply several chunks' groups on several
  // threads at once. OpenInSlots, with nothing else running, creates the (item.step, item.chunk)
  // state that StageMerged would create for the group's first rank in the common case, and
  // returns whether any rank of `ranks` is in it. StageInSlots then records every rank in the
  // common case exactly as StageMerged does (statuses[i] OK, the group's records when
  // out->merge_rank_events), appends the index of every other rank to *others (untouched in
  // `statuses`; the caller hands them to StageMerged, in order) and decides no release
  // (ReleaseIfReady does, once the chunk's groups are in). Calls of StageInSlots for different
  // chunks may run at once on different threads, and nothing else may run meanwhile: they read
  // the job's state and write only the chunk's marks and `out`.
  bool OpenInSlots(uint64_t generation, const StagedItem& item, absl::Span<const RankId> ranks);
  void StageInSlots(uint64_t generation, const StagedItem& item, absl::Span<const RankId> ranks,
                    absl::Time now, Decisions* out, absl::Span<absl::Status> statuses,
                    std::vector<uint32_t>* others);
  // Releases (step, chunk) if the release rule says so now (after StageInSlots); nothing when it
  // is released already or still waits.
  void ReleaseIfReady(Step step, ChunkId chunk, absl::Time now, Decisions* out) {
    MaybeRelease(step, chunk, now, out);
  }
  absl::Status Skip(RankId rank, uint64_t generation, Step step, absl::string_view reason,
                    absl::Time now, Decisions* out);
  absl::Status SyncDone(RankId rank, uint64_t generation, absl::Span<const SyncDoneItem> items,
                        absl::Time now, Decisions* out);
  // The same one-item SyncDoneBatch from several ranks (a node's ranks report a sync alike:
  // AgentBatch.merged_sync_dones): records the reports of ranks[0], ranks[1], ... for as long as
  // each is the common report (a member's fresh report of a released chunk, as SyncDoneInSlot
  // takes it), exactly as SyncDone(ranks[i], generation, {item}) would (each answered OK, the same
  // events and state), and returns how many it recorded. The rank after them, if any, is not the
  // common report: the caller applies it through SyncDone, then calls again with the rest. What
  // holds for every rank (the job's state, the chunk-step, the item's group) is looked up once.
  size_t SyncDonesInSlots(uint64_t generation, const SyncDoneItem& item,
                          absl::Span<const RankId> ranks, absl::Time now, Decisions* out);

  // Aborts the current generation (e.g. a rank was lost): every joined rank gets an AbortNotice;
  // later inputs of this generation are ABORTED until ranks join again. No-op if already aborted.
  void Abort(std::string reason, absl::Time now, Decisions* out);

  // Notices `rank` must hold after (re)attaching: the abort of the generation if aborted, else the
  // StepSkipped of retained skipped steps it voted for, and the directives released to it that it
  // has not reported SyncDone for.
  std::vector<Notice> NoticesToHold(RankId rank) const;

  // Ranks that joined the current generation.
  std::vector<RankId> JoinedRanks() const;
  bool IsJoined(RankId rank) const { return ranks_.contains(rank); }

  // Every chunk's oldest unfinished step, its state and waiting time; the contributor and rank
  // lists (staged, missing, sync_pending) only for chunks waiting longer than `lists_after` (a
  // stall inspector asks for them only past the smallest deadline: building them is O(ranks)).
  // Each list holds at most `list_limit` entries (its first, by rank); the counts are of all.
  JobSnapshot Snapshot(absl::Time now, absl::Duration lists_after = -absl::InfiniteDuration(),
                       SnapshotLists lists = SnapshotLists::kAll,
                       size_t list_limit = SIZE_MAX) const;

  // Calls fn(rank) for each contributor of `chunk` that has not staged `step`, in the chunk's
  // order (a rank once per optimizer it is missing; every contributor for a step not retained),
  // without copying any contributor: what counting who is missing per node needs. Nothing for a
  // chunk out of range.
  void ForEachMissing(Step step, ChunkId chunk, absl::FunctionRef<void(RankId)> fn) const;

  // The state of one (step, chunk). INVALID_ARGUMENT for a chunk out of range, OUT_OF_RANGE for a
  // step no longer retained; a step not started yet is IDLE with every contributor missing. Each
  // list (staged with staged_after, missing, sync_pending) holds at most `list_limit` entries, its
  // first ones in slot order (by rank); the counts are of all of them. O(contributors), but what
  // it allocates is bounded by the limit: a stall report at 131,072 ranks lists a few.
  absl::StatusOr<ChunkSnapshot> ChunkAt(Step step, ChunkId chunk, absl::Time now,
                                        size_t list_limit = SIZE_MAX) const;

  const std::string& job_id() const { return job_id_.str(); }
  uint64_t generation() const { return generation_; }
  JobState state() const { return state_; }
  const JobPlan& plan() const { return plan_; }
  // Step `rank` stages next (first_step before it joined).
  Step rank_step(RankId rank) const;

 private:
  struct RankState {
    std::string incarnation;
    std::string session_id;
    Step step = 0;         // changed only through SetRankStep (it keeps step_census_)
    bool counted = false;  // step is counted in step_census_
    // The first step of its run: the job's first step, or for a rank that joined a rebuilt
    // generation without a resume (its process started again), the step it started at.
    Step run_from = 0;
  };

  // The (step, chunk)'s state, created (and sized for the chunk's contributors) on first use.
  ChunkStep& ChunkStepFor(Step step, ChunkId chunk);
  // Moves `state` to `step`, keeping step_census_ (how many ranks are at each step) exact, so that
  // the lowest step of any rank is O(1) instead of a scan of every rank on every advance.
  void SetRankStep(RankId rank, RankState& state, Step step);
  // The rank's step as SetRankStep last set it, kNoStep when it never did: read from a compact
  // array (8 bytes a rank), so that check-ins arriving in any rank order do not each bring a
  // RankState into the cache.
  static constexpr Step kNoStep = ~Step{0};
  Step KnownStep(RankId rank) const {
    return rank < rank_steps_.size() ? rank_steps_[rank] : kNoStep;
  }
  // The lowest step of any joined rank; `if_none` when no rank joined.
  Step LowestRankStep(Step if_none) const {
    return step_census_.empty() ? if_none : step_census_.begin()->first;
  }

  // A report of `step`, which is no longer retained, from a rank that is past it (here, or by its
  // resume) and whose run includes it: the step was finished (released or skipped) with what the
  // rank reported for it, and the client sends a report again when its Ack was lost with its
  // connection. Answered OK as a duplicate; its checksum can no longer be compared. A step before
  // the rank's run (before the job's first step) is still OUT_OF_RANGE.
  bool LateRepeat(RankId rank, Step step) const;
  absl::Status CheckSender(RankId rank, uint64_t generation) const;
  // CheckSender, then 1..max_batch_items items.
  absl::Status CheckBatch(RankId rank, uint64_t generation, size_t items) const;
  // Validates item `i` of a check-in against the rank's step. Sets *duplicate when the item
  // repeats a check-in already recorded with the same checksum, or is a late repeat (LateRepeat).
  // The same for CheckSyncDone.
  absl::Status CheckStaged(RankId rank, size_t i, const StagedItem& item, bool* duplicate,
                           Decisions* out, absl::Time now) const;
  absl::Status CheckSyncDone(RankId rank, size_t i, const SyncDoneItem& item, bool* duplicate,
                             Decisions* out, absl::Time now) const;
  // Records a SyncDone of one item that SyncDone's checks would accept as fresh (the plan
  // complete, a member's one checksum or none, the chunk released, no report of the rank yet)
  // exactly as SyncDone does, and returns true; returns false, changing nothing, for any other.
  // SyncDonesInSlots of the one rank.
  bool SyncDoneInSlot(RankId rank, uint64_t generation, const SyncDoneItem& item, absl::Time now,
                      Decisions* out);
  // What SyncDoneInSlot checks that holds for every rank reporting `item`: the chunk-step it
  // reports on, released and keeping its reports by slot, in a generation that takes reports.
  // Nullptr when it does not hold (each rank then goes through SyncDone).
  ChunkStep* ReleasedInSlots(uint64_t generation, const SyncDoneItem& item);
  // Once every member of a released (step, chunk) reported SyncDone: its kSyncComplete record and
  // the checksum audit (CheckChecksums).
  void RecordIfSyncComplete(Step step, ChunkId chunk, const ChunkStep& cs, absl::Time now,
                            Decisions* out);
  // Step-range check shared by Stage, Skip and SyncDone for steps at or after the rank's step.
  absl::Status CheckNotAhead(RankId rank, absl::string_view field, Step step) const;
  std::string UnfinishedChunks(RankId rank) const;

  // The new generation is the current one + 1, or `at_least` when that is higher. `stale_runs`:
  // the current generation's runs began before an abort the caller learned of from a resume (and
  // recorded in aborted_through_): its ranks are aborted to start over, never to re-join with their
  // resumes.
  void StartGeneration(absl::Time now, absl::string_view reason, Decisions* out,
                       uint64_t at_least = 0, bool stale_runs = false);
  // What a Join answers `rank` (joined in the current generation).
  JoinResult Answer(const RankState& rank, bool reconnect, bool resumed) const;
  // Records what a resuming rank re-announced (its step, check-ins and executed syncs).
  void ApplyResume(RankId rank, const ResumeState& resume, absl::Time now, Decisions* out);
  // Once the plan is complete: counts ranks past a step as having staged and synced it, releases
  // what is complete (or was synced before a restart) and advances ranks.
  void Reconcile(absl::Time now, Decisions* out);
  // In a generation rebuilt from resumes (rebuilt_), once per (step, chunk): the ranks already past
  // `step` staged and synced it with the old coordinator (a rank passes a step only once its
  // chunks are done): their contributions count as staged, their SyncDone as reported.
  void CountRanksPast(Step step, ChunkId chunk, ChunkStep& cs, absl::Time now);
  // `step` is skipped, known to have been skipped, or has a skip vote: no chunk of it may be
  // released.
  bool MaySkip(Step step) const;
  // Releases (step, chunk) when the release rule (release_rule.h) says so; aborts the generation
  // if the rule finds its invariant broken.
  void MaybeRelease(Step step, ChunkId chunk, absl::Time now, Decisions* out);
  // Where a group of check-ins of `item` may be recorded in the chunk's slots (StageMerged's
  // common case): the chunk's slots and the item's optimizer among them, when the generation is
  // current, the plan complete, the chunk in range, the optimizer declared and the step neither
  // skipped nor voted to skip; nullopt otherwise.
  struct InSlots {
    const ChunkSlots* slots;
    uint32_t optimizer;
  };
  std::optional<InSlots> InSlotsFor(uint64_t generation, const StagedItem& item) const;
  // The chunk-step's slot of `rank`'s check-in when it is in the common case: the rank at
  // item.step, a contributor of the item, not staged yet, in a chunk-step started with the slots
  // (cs may be nullptr: not started).
  std::optional<uint32_t> FreshSlot(const InSlots& where, const ChunkStep* cs, Step step,
                                    RankId rank) const;
  // Starts loading what FreshSlot and RecordInSlot will read and write for `rank` (its step, and
  // its slot's marks in `cs`, which may be nullptr). A hint only: changes nothing.
  void PrefetchCheckin(const InSlots& where, const ChunkStep* cs, RankId rank) const;
  // Records `rank`'s fresh check-in of `item` in `slot` of `cs` (FreshSlot), joining the group's
  // record *record (SIZE_MAX: none yet; `rest` ranks of the group follow) when
  // out->merge_rank_events.
  void RecordInSlot(ChunkStep& cs, uint32_t slot, const StagedItem& item, RankId rank, size_t rest,
                    absl::Time now, size_t* record, Decisions* out);
  // The slots of `count` consecutive ranks from `first` when each is in FreshSlot's common case
  // and the slots are computed (ChunkSlots::ContributorSlotsOfRun): the run is then recorded at
  // once (RecordRunInSlots). Nullopt otherwise: FreshSlot decides rank by rank.
  std::optional<ChunkSlots::SlotRun> FreshRun(const InSlots& where, const ChunkStep* cs, Step step,
                                              RankId first, uint32_t count) const;
  // FreshRun of the consecutive ranks from ranks[i] when there are at least 4 of them and ranks[i]
  // is not past a run already tried (*no_run_before): their count, with *run set; 0 otherwise,
  // moving *no_run_before past the run tried.
  size_t FreshRunFrom(const InSlots& where, const ChunkStep* cs, Step step,
                      absl::Span<const RankId> ranks, size_t i, size_t* no_run_before,
                      ChunkSlots::SlotRun* run) const;
  // The chunk-step's first and last check-in and who made the last, for a check-in of `item` by
  // `rank` just recorded.
  static void NoteLastCheckin(ChunkStep& cs, const StagedItem& item, RankId rank, absl::Time now);
  // RecordInSlot of each of `ranks` (consecutive, their slots `run`), in order: their marks
  // written at once.
  void RecordRunInSlots(ChunkStep& cs, ChunkSlots::SlotRun run, const StagedItem& item,
                        absl::Span<const RankId> ranks, size_t rest, absl::Time now, size_t* record,
                        Decisions* out);
  // The group's record of `rank`'s check-in (RecordInSlot's, after its mark).
  void JoinCheckinRecord(const StagedItem& item, RankId rank, size_t rest, absl::Time now,
                         size_t* record, Decisions* out);
  // The chunk-step of (step, chunk) if it exists (no creation).
  ChunkStep* FindChunkStep(Step step, ChunkId chunk);
  const ChunkStep* FindChunkStep(Step step, ChunkId chunk) const;
  void MaybeSkip(Step step, absl::Time now, Decisions* out);
  void MaybeAdvance(RankId rank, absl::Time now, Decisions* out);
  // Records `rank`'s SyncDone of (step, `cs`'s chunk) as cs.done.Insert does (false: it was in),
  // counting it in rank_synced_ when `step` is the rank's; `slot`: its member slot in cs.done's
  // slots when the caller looked it up. Every SyncDone recorded goes through here.
  bool InsertDone(ChunkStep& cs, Step step, RankId rank, absl::Span<const GroupChecksum> checksums,
                  std::optional<uint32_t> slot = std::nullopt);
  // The chunks of `step` whose SyncDones include `rank`'s.
  uint32_t CountSynced(RankId rank, Step step) const;
  // The chunks whose sync `rank` takes part in. Before the plan is complete (SyncDones and resumes
  // arrive then after a coordinator restart) they are the chunks of the rank's own plan: a rank
  // lists every chunk whose sync groups it is in.
  std::vector<ChunkId> ChunksSyncedBy(RankId rank) const;
  void CheckChecksums(Step step, ChunkId chunk, const ChunkStep& cs, absl::Time now,
                      Decisions* out) const;
  // A violation that ends the generation: records it, then aborts at `step`.
  void AbortGeneration(Step step, std::string reason, absl::Time now, Decisions* out);
  void AbortAt(Step step, std::string reason, absl::Time now, Decisions* out);
  void Trim();
  Event MakeEvent(EventKind kind, absl::Time now) const;
  // MakeEvent's fields, set on an event built in place.
  void InitEvent(EventKind kind, absl::Time now, Event* e) const;
  // An event about one (step, chunk).
  Event MakeChunkEvent(EventKind kind, absl::Time now, Step step, ChunkId chunk) const;
  // Records `rank`'s check-in (kCheckin, with its optimizer) or SyncDone (kSyncDone, with the
  // release's sequence) of (step, chunk): in a record of the same input when out->merge_rank_events
  // allows (Decisions), else in an event of its own.
  void AppendRankEvent(EventKind kind, absl::Time now, Step step, ChunkId chunk, RankId rank,
                       const std::string& optimizer, uint64_t sequence, Decisions* out) const;
  bool ChunkFinished(Step step, ChunkId chunk) const;

  // Constant after construction.
  const SharedJobId job_id_;  // shared with every event of the job
  const TrackerOptions options_;

  uint64_t generation_ = 0;
  bool rebuilt_ = false;  // a resume was applied in this generation
  // The latest generation known aborted (0: none), and why: one this tracker ended by starting
  // another, or one a resume names as aborted before its run began (ResumeState::restarted_after).
  // A resume of it or an older one, or of a run that began before it, comes from a rank that missed
  // the Abort.
  uint64_t aborted_through_ = 0;
  std::string aborted_why_;
  // Steps a resuming rank saw skipped (Resume.skipped_steps): nothing of them is released, and the
  // ranks past one count as its voters.
  std::set<Step> skipped_before_;
  uint64_t sequence_ = 0;  // per job, across generations
  uint64_t sessions_issued_ = 0;
  JobState state_ = JobState::kForming;
  std::string abort_reason_;
  Step abort_step_ = 0;
  JobPlan plan_;
  DenseRankMap<RankState> ranks_;
  std::vector<Step> rank_steps_;  // per rank: RankState::step once set, else kNoStep (KnownStep)
  // Per rank with a known step: how many chunks of that step hold its SyncDone (kept by
  // SetRankStep and InsertDone), so that a SyncDone that cannot finish the rank's step is told so
  // without looking at the step's other chunks (MaybeAdvance).
  std::vector<uint32_t> rank_synced_;
  std::map<Step, uint32_t> step_census_;  // step -> joined ranks at it
  OptimizerIds optimizer_ids_;            // keys of every ChunkStep's StagedSet (they point here)
  std::map<Step, StepState> steps_;
};

}  // namespace psync::core

#endif  // PSYNC_SERVER_CORE_JOB_TRACKER_H_
