// JobTracker's construction and the bookkeeping every other job_tracker_*.cc file uses: events
// stamped with the job and generation, a rank's step (and the census that keeps the lowest step
// O(1)), and the per-(step, chunk) state created on first use. The public contract is
// job_tracker.h; each concern lives in its own file:
//   job_tracker_join.cc       joins, generations, aborts, and who may send
//   job_tracker_resume.cc     rebuilding state after a coordinator restart (ApplyResume, Reconcile)
//   job_tracker_stage.cc      check-ins: validation, duplicates, skip disagreement
//   job_tracker_release.cc    applying the release rule (release_rule.h) and sending directives
//   job_tracker_skip.cc       skip votes and all-rank skips
//   job_tracker_sync_done.cc  SyncDone and the checksum audit
//   job_tracker_steps.cc      a rank's step: not-ahead checks, advancing, the history window
//   job_tracker_queries.cc    Pending, Snapshot, ChunkAt
// Thread-compatible: the owner serializes calls (job_tracker.h).
#include "server/core/job_tracker.h"

#include <algorithm>
#include <utility>

namespace psync::core {

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kForming:
      return "FORMING";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kAborted:
      return "ABORTED";
  }
  return "UNKNOWN";
}

JobTracker::JobTracker(std::string job_id, TrackerOptions options)
    : job_id_(std::move(job_id)), options_(std::move(options)) {}

Event JobTracker::MakeEvent(EventKind kind, absl::Time now) const {
  Event e;
  InitEvent(kind, now, &e);
  return e;
}

void JobTracker::InitEvent(EventKind kind, absl::Time now, Event* e) const {
  e->kind = kind;
  e->time = now;
  e->job_id = job_id_;
  e->generation = generation_;
}

Event JobTracker::MakeChunkEvent(EventKind kind, absl::Time now, Step step, ChunkId chunk) const {
  Event e = MakeEvent(kind, now);
  e.step = step;
  e.chunk = chunk;
  return e;
}

void JobTracker::AppendRankEvent(EventKind kind, absl::Time now, Step step, ChunkId chunk,
                                 RankId rank, const std::string& optimizer, uint64_t sequence,
                                 Decisions* out) const {
  std::vector<Event>& events = out->events;
  if (out->merge_rank_events) {
    Decisions::MergeRun& run = out->merge_run;
    if (run.checked > events.size()) run = Decisions::MergeRun();  // other events now
    // Any other event appended since (a release, a rejection) ends the run: it must stay after
    // every check-in it followed.
    for (; run.checked < events.size(); ++run.checked) {
      const EventKind k = events[run.checked].kind;
      if (k != EventKind::kCheckin && k != EventKind::kSyncDone) run.begin = run.checked + 1;
    }
    auto joins = [&](const Event& e) {
      return e.kind == kind && *e.step == step && *e.chunk == chunk && e.time == now &&
             e.sequence == sequence && e.generation == generation_ && e.optimizer == optimizer &&
             e.job_id == job_id_;
    };
    // The ranks of a node send the same items in the same order: the record after the one the
    // last item joined is most often this one's. Otherwise the run is searched from its end; a
    // node's batch holds a few dozen distinct inputs (chunks x optimizers) at once, so the search
    // is bounded, and a batch of many more makes one record per input beyond it, not more.
    constexpr size_t kMaxScan = 64;
    constexpr size_t kMergedRecordReserve = 64;
    size_t at = run.last + 1;  // 0 when there is no last
    bool found = at >= run.begin && at < events.size() && joins(events[at]);
    for (size_t k = events.size(); !found && k > run.begin && events.size() - k < kMaxScan; --k) {
      found = joins(events[k - 1]);
      at = k - 1;
    }
    if (found) {
      Event& e = events[at];
      if (e.rank.has_value()) {
        // A node's ranks at least, a relay's hundreds: not grown from one rank by doubling.
        e.ranks.reserve(kMergedRecordReserve);
        e.ranks.push_back(*e.rank);
        e.rank.reset();
      }
      e.ranks.push_back(rank);
      run.last = at;
      return;
    }
    run.last = events.size();
    run.checked = events.size() + 1;  // the record made below
  }
  // Built in place: a check-in's record is most of a batch's events.
  Event& e = events.emplace_back();
  InitEvent(kind, now, &e);
  e.step = step;
  e.chunk = chunk;
  e.rank = rank;
  e.optimizer = optimizer;
  e.sequence = sequence;
}

Step JobTracker::rank_step(RankId rank) const {
  if (const Step known = KnownStep(rank); known != kNoStep) return known;
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? plan_.first_step() : it->second.step;
}

bool JobTracker::LateRepeat(RankId rank, Step step) const {
  auto it = ranks_.find(rank);
  return it != ranks_.end() && step >= it->second.run_from && step < it->second.step &&
         steps_.find(step) == steps_.end();
}

ChunkStep& JobTracker::ChunkStepFor(Step step, ChunkId chunk) {
  auto [it, created] = steps_[step].chunks.try_emplace(chunk);
  if (!created) return it->second;
  // Once the plan is complete: one array slot per contributor and member (the plan's ChunkSlots
  // outlive the step: both are dropped together when a generation starts).
  const ChunkSlots* slots = plan_.complete() ? &plan_.chunk(chunk).slots : nullptr;
  it->second.staged.Init(&optimizer_ids_, slots);
  it->second.done.Init(slots);
  return it->second;
}

void JobTracker::SetRankStep(RankId rank, RankState& state, Step step) {
  if (state.counted) {
    auto it = step_census_.find(state.step);
    if (--it->second == 0) step_census_.erase(it);
  }
  state.step = step;
  state.counted = true;
  if (rank >= rank_steps_.size()) {
    rank_steps_.resize(static_cast<size_t>(rank) + 1, kNoStep);
    rank_synced_.resize(rank_steps_.size(), 0);
  }
  rank_steps_[rank] = step;
  rank_synced_[rank] = CountSynced(rank, step);
  ++step_census_[step];
}

uint32_t JobTracker::CountSynced(RankId rank, Step step) const {
  auto st = steps_.find(step);
  if (st == steps_.end()) return 0;
  uint32_t synced = 0;
  for (const auto& [chunk, cs] : st->second.chunks) synced += cs.done.contains(rank) ? 1 : 0;
  return synced;
}

bool JobTracker::InsertDone(ChunkStep& cs, Step step, RankId rank,
                            absl::Span<const GroupChecksum> checksums,
                            std::optional<uint32_t> slot) {
  const bool fresh = slot.has_value() ? cs.done.InsertAtSlot(*slot, rank, checksums)
                                      : cs.done.Insert(rank, checksums);
  if (fresh && KnownStep(rank) == step) ++rank_synced_[rank];
  return fresh;
}

std::vector<RankId> JobTracker::JoinedRanks() const {
  std::vector<RankId> out;
  out.reserve(ranks_.size());
  for (const auto& [rank, state] : ranks_) out.push_back(rank);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace psync::core
