#include "server/core/job_tracker.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace psync::core {
namespace {

std::string Describe(const Contributor& c) { return absl::StrCat("rank ", c.rank, " ", c.optimizer); }

std::string ChecksumText(const std::optional<uint64_t>& checksum) {
  return checksum ? absl::StrFormat("%#x", *checksum) : "none";
}

std::string ChecksumsText(absl::Span<const GroupChecksum> checksums) {
  return absl::StrCat(
      "{", absl::StrJoin(checksums, ",", [](std::string* out, const GroupChecksum& g) {
        absl::StrAppend(out, g.group, ":", absl::StrFormat("%#x", g.checksum));
      }), "}");
}

// Checksums compare regardless of the order the rank listed its groups in.
GroupChecksums SortedByGroup(absl::Span<const GroupChecksum> checksums) {
  GroupChecksums sorted(checksums.begin(), checksums.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const GroupChecksum& a, const GroupChecksum& b) { return a.group < b.group; });
  return sorted;
}

bool IsDeclared(const ChunkPart* part, absl::string_view optimizer) {
  return part != nullptr && std::find(part->optimizers.begin(), part->optimizers.end(),
                                      optimizer) != part->optimizers.end();
}

// The index of the first item whose key an earlier item has, or -1. Batches of a few items (what
// node agents send) compare pairwise, without allocating; larger ones use a hash set.
template <typename Item, typename KeyFn>
ptrdiff_t FirstRepeat(absl::Span<const Item> items, KeyFn key) {
  constexpr size_t kPairwise = 16;
  if (items.size() <= kPairwise) {
    for (size_t i = 1; i < items.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (key(items[i]) == key(items[j])) return static_cast<ptrdiff_t>(i);
      }
    }
    return -1;
  }
  absl::flat_hash_set<decltype(key(items[0]))> seen;
  seen.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (!seen.insert(key(items[i])).second) return static_cast<ptrdiff_t>(i);
  }
  return -1;
}

}  // namespace

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kForming: return "FORMING";
    case JobState::kRunning: return "RUNNING";
    case JobState::kAborted: return "ABORTED";
  }
  return "UNKNOWN";
}

JobTracker::JobTracker(std::string job_id, TrackerOptions options)
    : job_id_(std::move(job_id)), options_(std::move(options)) {}

Event JobTracker::MakeEvent(EventKind kind, absl::Time now) const {
  Event e;
  e.kind = kind;
  e.time = now;
  e.job_id = job_id_;
  e.generation = generation_;
  return e;
}

Step JobTracker::rank_step(RankId rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? plan_.first_step() : it->second.step;
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

void JobTracker::SetRankStep(RankState& state, Step step) {
  if (state.counted) {
    auto it = step_census_.find(state.step);
    if (--it->second == 0) step_census_.erase(it);
  }
  state.step = step;
  state.counted = true;
  ++step_census_[step];
}

std::vector<RankId> JobTracker::JoinedRanks() const {
  std::vector<RankId> out;
  out.reserve(ranks_.size());
  for (const auto& [rank, state] : ranks_) out.push_back(rank);
  std::sort(out.begin(), out.end());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Join

void JobTracker::StartGeneration(absl::Time now, absl::string_view reason, Decisions* out) {
  if (generation_ > 0 && state_ != JobState::kAborted) {  // aborted ranks already know
    for (RankId rank : JoinedRanks()) {
      out->deliveries.push_back(
          {rank, AbortNotice{generation_, ranks_[rank].step,
                             absl::StrCat(reason, "; join generation ", generation_ + 1)}});
    }
  }
  ++generation_;
  state_ = JobState::kForming;
  abort_reason_.clear();
  plan_ = JobPlan();
  ranks_.clear();
  step_census_.clear();
  steps_.clear();
  Event e = MakeEvent(EventKind::kGeneration, now);
  e.detail = std::string(reason);
  out->events.push_back(std::move(e));
}

absl::StatusOr<JoinResult> JobTracker::Join(const RankPlan& plan, absl::Time now, Decisions* out,
                                            absl::string_view secret) {
  auto existing = ranks_.find(plan.rank);
  if (existing != ranks_.end() && state_ != JobState::kAborted &&
      existing->second.incarnation == plan.incarnation) {
    if (!plan_.SameAsJoined(plan)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", plan.rank, " joined again with incarnation '", plan.incarnation,
          "' but a different plan; a changed plan needs a new incarnation"));
    }
    Event e = MakeEvent(EventKind::kJoin, now);
    e.rank = plan.rank;
    e.detail = "reconnect";
    out->events.push_back(std::move(e));
    return JoinResult{generation_, existing->second.session_id, existing->second.step, true};
  }

  // Decide whether this join opens a new generation, then check the plan against it without
  // changing anything until the plan merges.
  std::string new_generation_reason;
  if (generation_ == 0) {
    new_generation_reason = "first join";
  } else if (state_ == JobState::kAborted) {
    new_generation_reason = absl::StrCat("rank ", plan.rank, " joined after abort (", abort_reason_, ")");
  } else if (existing != ranks_.end()) {
    new_generation_reason = absl::StrCat("rank ", plan.rank, " restarted (incarnation '",
                                         existing->second.incarnation, "' -> '", plan.incarnation,
                                         "')");
  }
  if (new_generation_reason.empty()) {
    // Merge checks everything before it changes anything (plan.h), so no trial copy: copying the
    // plan on every Join made joining N ranks O(N^2).
    if (auto s = plan_.Merge(plan); !s.ok()) return s;
  } else {
    JobPlan trial;
    if (auto s = trial.Merge(plan); !s.ok()) return s;
    // A coordinator that never saw the job continues the generation numbering of resuming ranks.
    if (generation_ == 0 && plan.resume.has_value()) generation_ = plan.resume->generation;
    StartGeneration(now, new_generation_reason, out);
    plan_ = std::move(trial);
  }

  RankState& state = ranks_[plan.rank];
  state.incarnation = plan.incarnation;
  state.session_id = absl::StrCat("g", generation_, "-r", plan.rank, "-s", ++sessions_issued_,
                                  secret.empty() ? "" : "-", secret);
  SetRankStep(state, plan_.first_step());
  if (plan.resume.has_value()) ApplyResume(plan.rank, *plan.resume, now, out);
  Event e = MakeEvent(EventKind::kJoin, now);
  e.rank = plan.rank;
  e.detail = absl::StrCat(plan_.ranks_joined(), "/", plan_.world_size(), " ranks joined");
  out->events.push_back(std::move(e));

  if (plan_.complete()) {
    state_ = JobState::kRunning;
    Reconcile(now, out);
  }
  return JoinResult{generation_, state.session_id, ranks_[plan.rank].step, false,
                    plan.resume.has_value()};
}

void JobTracker::ApplyResume(RankId rank, const ResumeState& resume, absl::Time now,
                             Decisions* out) {
  SetRankStep(ranks_[rank], resume.step);
  for (const auto& [chunk, optimizer] : resume.staged) {
    ChunkStep& cs = ChunkStepFor(resume.step, chunk);
    const Contributor who{rank, optimizer};
    cs.staged.Insert(who, StagedMark(std::nullopt, now));
    if (cs.first_checkin == absl::InfinitePast()) cs.first_checkin = now;
    cs.last_checkin = now;
    cs.last = who;
  }
  for (ChunkId chunk : resume.synced_chunks) {
    ChunkStep& cs = ChunkStepFor(resume.step, chunk);
    cs.done.Insert(rank, GroupChecksums());
    cs.synced_before = true;
  }
  for (ChunkId chunk : resume.released_chunks) {
    ChunkStepFor(resume.step, chunk).synced_before = true;
  }
  // A rank that synced every chunk it takes part in has finished the step: it may check in for
  // the next one while the other ranks are still re-joining.
  const std::vector<ChunkId> mine = ChunksSyncedBy(rank);
  const bool finished =
      !mine.empty() && std::all_of(mine.begin(), mine.end(), [&](ChunkId chunk) {
        return std::find(resume.synced_chunks.begin(), resume.synced_chunks.end(), chunk) !=
               resume.synced_chunks.end();
      });
  if (finished) SetRankStep(ranks_[rank], resume.step + 1);
  Event e = MakeEvent(EventKind::kJoin, now);
  e.rank = rank;
  e.step = resume.step;
  e.detail = absl::StrCat("resumed at step ", resume.step, " with ", resume.staged.size(),
                          " check-ins, ", resume.synced_chunks.size(), " synced and ",
                          resume.released_chunks.size(), " released chunks");
  out->events.push_back(std::move(e));
}

void JobTracker::Reconcile(absl::Time now, Decisions* out) {
  // Collect first: releasing and skipping may trim steps_.
  std::vector<std::pair<Step, std::vector<ChunkId>>> pending;
  for (const auto& [step, st] : steps_) {
    pending.emplace_back(step, std::vector<ChunkId>());
    for (const auto& [chunk, cs] : st.chunks) pending.back().second.push_back(chunk);
  }
  for (const auto& [step, chunks] : pending) {
    auto st = steps_.find(step);
    if (st == steps_.end()) continue;
    for (ChunkId chunk : chunks) {
      // A rank already past `step` staged and synced everything it had there (resumed ranks).
      ChunkStep& cs = ChunkStepFor(step, chunk);
      const ChunkInfo& info = plan_.chunk(chunk);
      info.ForEachContributor([&](const Contributor& who) {
        if (rank_step(who.rank) > step && cs.staged.Insert(who, StagedMark(std::nullopt, now))) {
          if (cs.first_checkin == absl::InfinitePast()) cs.first_checkin = now;
        }
      });
      for (RankId member : info.members) {
        if (rank_step(member) > step) cs.done.Insert(member, GroupChecksums());
      }
      MaybeRelease(step, chunk, now, out);
    }
    MaybeSkip(step, now, out);
  }
  for (RankId rank : JoinedRanks()) MaybeAdvance(rank, now, out);
}

absl::Status JobTracker::CheckSender(RankId rank, uint64_t generation) const {
  if (generation != generation_) {
    return absl::FailedPreconditionError(absl::StrCat("generation ", generation, " is stale: job '",
                                                      job_id_.str(), "' is at generation ", generation_,
                                                      "; join again"));
  }
  if (state_ == JobState::kAborted) {
    return absl::AbortedError(absl::StrCat("job '", job_id_.str(), "' generation ", generation_,
                                           " was aborted at step ", abort_step_, ": ",
                                           abort_reason_, "; join again"));
  }
  if (!ranks_.contains(rank)) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, " has not joined generation ", generation_));
  }
  return absl::OkStatus();
}

absl::Status JobTracker::CheckBatch(RankId rank, uint64_t generation, size_t items) const {
  if (auto s = CheckSender(rank, generation); !s.ok()) return s;
  if (items == 0 || items > options_.max_batch_items) {
    return absl::InvalidArgumentError(absl::StrCat("items must have 1..", options_.max_batch_items,
                                                   " entries (got ", items, ")"));
  }
  return absl::OkStatus();
}

absl::Status JobTracker::CheckAttach(RankId rank, uint64_t generation,
                                     absl::string_view session_id) const {
  if (plan_.world_size() > 0 && rank >= plan_.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " out of range [0, ", plan_.world_size(), ")"));
  }
  if (generation != generation_) {
    return absl::FailedPreconditionError(absl::StrCat("generation ", generation, " is stale: job '",
                                                      job_id_.str(), "' is at generation ", generation_,
                                                      "; join again"));
  }
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, " has not joined generation ", generation_));
  }
  if (it->second.session_id != session_id) {
    return absl::PermissionDeniedError(
        absl::StrCat("session_id does not match the session issued to rank ", rank));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Steps

std::string JobTracker::UnfinishedChunks(RankId rank) const {
  const Step step = rank_step(rank);
  std::vector<ChunkId> missing;
  auto st = steps_.find(step);
  for (ChunkId c : plan_.synced_chunks(rank)) {
    if (st == steps_.end()) {
      missing.push_back(c);
      continue;
    }
    auto cs = st->second.chunks.find(c);
    if (cs == st->second.chunks.end() || !cs->second.done.contains(rank)) missing.push_back(c);
  }
  if (!plan_.complete()) return "the job is still forming";
  return absl::StrCat("SyncDone missing for chunks [", absl::StrJoin(missing, ","), "]");
}

absl::Status JobTracker::CheckNotAhead(RankId rank, absl::string_view field, Step step) const {
  const Step current = rank_step(rank);
  if (step == current + 1) {
    return absl::FailedPreconditionError(absl::StrCat(field, " ", step, ": rank ", rank,
                                                      " has not finished step ", current, " (",
                                                      UnfinishedChunks(rank), ")"));
  }
  if (step > current + 1) {
    return absl::OutOfRangeError(absl::StrCat(field, " ", step, " is too far ahead: rank ", rank,
                                              " is at step ", current));
  }
  return absl::OkStatus();
}

absl::Status JobTracker::CheckStaged(RankId rank, size_t i, const StagedItem& item,
                                     bool* duplicate, Decisions* out, absl::Time now) const {
  *duplicate = false;
  // The field an error names; built only for an error.
  const auto where = [i] { return absl::StrCat("items[", i, "]"); };
  if (item.chunk >= plan_.num_chunks()) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ".chunk ", item.chunk,
                                                   " out of range [0, ", plan_.num_chunks(), ")"));
  }
  // Declared contributors are the chunk's slots once the plan is complete (no plan lookup).
  const bool declared =
      plan_.complete()
          ? plan_.chunk(item.chunk).slots.ContributorSlot(rank, item.optimizer).has_value()
          : IsDeclared(plan_.part(rank, item.chunk), item.optimizer);
  if (!declared) {
    const ChunkPart* part = plan_.part(rank, item.chunk);
    return absl::InvalidArgumentError(absl::StrCat(
        where(), ".optimizer '", item.optimizer, "' is not declared by rank ", rank, " for chunk ",
        item.chunk, " (declared: [",
        part == nullptr ? "" : absl::StrJoin(part->optimizers, ","), "])"));
  }
  const Step current = rank_step(rank);
  if (item.step > current) return CheckNotAhead(rank, absl::StrCat(where(), ".step"), item.step);
  auto st = steps_.find(item.step);
  if (item.step < current && st == steps_.end()) {
    const Step oldest = steps_.empty() ? current : steps_.begin()->first;
    return absl::OutOfRangeError(absl::StrCat(where(), ".step ", item.step,
                                              " is before the oldest retained step ", oldest));
  }
  if (st != steps_.end() && st->second.skipped) {
    return absl::FailedPreconditionError(
        absl::StrCat(where(), ".step ", item.step, " was skipped by every rank"));
  }
  const Contributor who{rank, item.optimizer};
  if (st != steps_.end()) {
    auto cs = st->second.chunks.find(item.chunk);
    if (cs != st->second.chunks.end()) {
      const std::optional<StagedMark> found = cs->second.staged.Find(who);
      if (found.has_value()) {
        if (found->checksum() == item.checksum) {
          *duplicate = true;
          return absl::OkStatus();
        }
        Event v = MakeEvent(EventKind::kViolation, now);
        v.step = item.step;
        v.chunk = item.chunk;
        v.rank = rank;
        v.optimizer = item.optimizer;
        v.detail = absl::StrCat("conflicting duplicate check-in: shard_checksum ",
                                ChecksumText(item.checksum), " after ",
                                ChecksumText(found->checksum()));
        out->events.push_back(std::move(v));
        return absl::AlreadyExistsError(absl::StrCat(
            where(), ": step ", item.step, " chunk ", item.chunk, " ", Describe(who),
            " already staged with shard_checksum ", ChecksumText(found->checksum()), ", now ",
            ChecksumText(item.checksum)));
      }
    }
  }
  if (item.step < current) {
    return absl::FailedPreconditionError(absl::StrCat(where(), ".step ", item.step,
                                                      " is already finished for rank ", rank,
                                                      " (it is at step ", current, ")"));
  }
  return absl::OkStatus();
}

absl::Status JobTracker::Stage(RankId rank, uint64_t generation,
                               absl::Span<const StagedItem> items, absl::Time now,
                               Decisions* out) {
  if (auto s = CheckBatch(rank, generation, items.size()); !s.ok()) return s;
  // Items are judged in order: the first bad one names the error.
  const ptrdiff_t repeat = FirstRepeat(items, [](const StagedItem& item) {
    return std::tuple<Step, ChunkId, absl::string_view>(item.step, item.chunk, item.optimizer);
  });
  absl::InlinedVector<bool, 16> fresh(items.size(), false);
  for (size_t i = 0; i < items.size(); ++i) {
    const StagedItem& item = items[i];
    if (static_cast<ptrdiff_t>(i) == repeat) {
      return absl::InvalidArgumentError(absl::StrCat("items[", i, "] repeats an earlier item (step ",
                                                     item.step, " chunk ", item.chunk, " ",
                                                     item.optimizer, ")"));
    }
    bool duplicate = false;
    if (auto s = CheckStaged(rank, i, item, &duplicate, out, now); !s.ok()) return s;
    fresh[i] = !duplicate;
  }

  // The input is valid. A check-in for a step that other ranks skip is a disagreement.
  const Step current = rank_step(rank);
  auto st = steps_.find(current);
  if (st != steps_.end() && !st->second.skip_votes.empty() &&
      std::find(fresh.begin(), fresh.end(), true) != fresh.end()) {
    std::vector<RankId> voters(st->second.skip_votes.begin(), st->second.skip_votes.end());
    std::sort(voters.begin(), voters.end());
    AbortGeneration(current,
                    absl::StrCat("skip disagreement at step ", current, ": rank ", rank,
                                 " staged while ranks [", absl::StrJoin(voters, ","),
                                 "] skip it (", st->second.skip_reason, ")"),
                    now, out);
    return absl::AbortedError(abort_reason_);
  }

  absl::InlinedVector<ChunkId, 8> touched;
  for (size_t i = 0; i < items.size(); ++i) {
    const StagedItem& item = items[i];
    const Contributor who{rank, item.optimizer};
    if (!fresh[i]) {
      Event e = MakeEvent(EventKind::kDuplicate, now);
      e.step = item.step;
      e.chunk = item.chunk;
      e.rank = rank;
      e.optimizer = item.optimizer;
      out->events.push_back(std::move(e));
      continue;
    }
    ChunkStep& cs = ChunkStepFor(item.step, item.chunk);
    cs.staged.Insert(who, StagedMark(item.checksum, now));
    if (cs.first_checkin == absl::InfinitePast()) cs.first_checkin = now;
    cs.last_checkin = now;
    cs.last = who;
    Event e = MakeEvent(EventKind::kCheckin, now);
    e.step = item.step;
    e.chunk = item.chunk;
    e.rank = rank;
    e.optimizer = item.optimizer;
    out->events.push_back(std::move(e));
    touched.push_back(item.chunk);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (ChunkId chunk : touched) MaybeRelease(current, chunk, now, out);
  return absl::OkStatus();
}

void JobTracker::MaybeRelease(Step step, ChunkId chunk, absl::Time now, Decisions* out) {
  if (!plan_.complete()) return;
  ChunkStep& cs = ChunkStepFor(step, chunk);
  if (cs.released) return;
  const ChunkInfo& info = plan_.chunk(chunk);
  if (info.num_contributors() == 0) return;
  // `staged` holds only declared contributors of the chunk (Stage, a resume and Reconcile admit
  // no others), so comparing sizes is the whole check: O(1) per check-in instead of a scan of
  // N x K contributors.
  if (!cs.synced_before && cs.staged.size() != info.num_contributors()) return;
  if (cs.first_checkin == absl::InfinitePast()) cs.first_checkin = now;
  cs.released = true;
  cs.sequence = ++sequence_;
  cs.released_at = now;
  SyncDirective directive{generation_, step, chunk, cs.sequence, cs.last, now - cs.first_checkin};
  for (RankId member : info.members) {
    // Members that already executed this sync (re-announced after a restart) need no directive.
    if (!cs.done.contains(member)) out->deliveries.push_back({member, directive});
  }
  Event e = MakeEvent(EventKind::kRelease, now);
  e.step = step;
  e.chunk = chunk;
  e.rank = cs.last.rank;
  e.optimizer = cs.last.optimizer;
  e.sequence = cs.sequence;
  e.duration = now - cs.first_checkin;
  e.detail = absl::StrCat("all ", info.num_contributors(), " contributors staged; last ",
                          Describe(cs.last), "; directive to ", info.members.size(), " ranks");
  out->events.push_back(std::move(e));
  if (cs.done.size() == info.members.size()) {
    // Every member had synced before a coordinator restart: complete at once.
    Event c = MakeEvent(EventKind::kSyncComplete, now);
    c.step = step;
    c.chunk = chunk;
    c.sequence = cs.sequence;
    c.duration = absl::ZeroDuration();
    c.detail = absl::StrCat("all ", cs.done.size(), " ranks had synced before a coordinator restart");
    out->events.push_back(std::move(c));
    CheckChecksums(step, chunk, cs, now, out);
  }
}

// ---------------------------------------------------------------------------------------------
// Skips

absl::Status JobTracker::Skip(RankId rank, uint64_t generation, Step step,
                              absl::string_view reason, absl::Time now, Decisions* out) {
  if (auto s = CheckSender(rank, generation); !s.ok()) return s;
  if (reason.size() > options_.max_reason_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reason must be at most ", options_.max_reason_length, " characters (got ", reason.size(), ")"));
  }
  const Step current = rank_step(rank);
  if (step > current) return CheckNotAhead(rank, "step", step);
  auto st = steps_.find(step);
  if (step < current) {
    if (st != steps_.end() && st->second.skipped) return absl::OkStatus();  // duplicate
    if (st == steps_.end()) {
      return absl::OutOfRangeError(absl::StrCat("step ", step, " is before the oldest retained step ",
                                                steps_.empty() ? current : steps_.begin()->first));
    }
    return absl::FailedPreconditionError(absl::StrCat("step ", step, " is already finished for rank ",
                                                      rank, " (it is at step ", current, ")"));
  }
  if (st != steps_.end() && st->second.skip_votes.contains(rank)) return absl::OkStatus();

  if (st != steps_.end()) {
    std::vector<std::string> stagers;
    for (const auto& [chunk, cs] : st->second.chunks) {
      cs.staged.ForEach([&, c = chunk](const Contributor& who, const StagedMark&) {
        stagers.push_back(absl::StrCat("rank ", who.rank, " ", who.optimizer, " chunk ", c));
      });
    }
    if (!stagers.empty()) {
      std::sort(stagers.begin(), stagers.end());
      AbortGeneration(step,
                      absl::StrCat("skip disagreement at step ", step, ": rank ", rank,
                                   " skips (", reason, ") but ", stagers.size(),
                                   " check-ins were staged, first: ", stagers.front()),
                      now, out);
      return absl::AbortedError(abort_reason_);
    }
  }
  StepState& state = steps_[step];
  if (state.skip_votes.empty()) state.skip_reason = std::string(reason);
  state.skip_votes.insert(rank);
  Event e = MakeEvent(EventKind::kSkipVote, now);
  e.step = step;
  e.rank = rank;
  e.detail = std::string(reason);
  out->events.push_back(std::move(e));
  MaybeSkip(step, now, out);
  return absl::OkStatus();
}

void JobTracker::MaybeSkip(Step step, absl::Time now, Decisions* out) {
  auto st = steps_.find(step);
  if (!plan_.complete() || st == steps_.end() || st->second.skipped ||
      st->second.skip_votes.size() < plan_.world_size()) {
    return;
  }
  st->second.skipped = true;
  for (RankId rank : JoinedRanks()) {
    out->deliveries.push_back({rank, StepSkipped{generation_, step}});
    SetRankStep(ranks_[rank], step + 1);
  }
  Event e = MakeEvent(EventKind::kStepSkipped, now);
  e.step = step;
  e.detail = st->second.skip_reason;
  out->events.push_back(std::move(e));
  Trim();
}

void JobTracker::AbortGeneration(Step step, std::string reason, absl::Time now, Decisions* out) {
  // Skip disagreements are protocol violations; other aborts (a lost rank) are not.
  Event v = MakeEvent(EventKind::kViolation, now);
  v.step = step;
  v.detail = reason;
  out->events.push_back(std::move(v));
  AbortAt(step, std::move(reason), now, out);
}

void JobTracker::Abort(std::string reason, absl::Time now, Decisions* out) {
  if (state_ == JobState::kAborted || generation_ == 0) return;
  AbortAt(LowestRankStep(plan_.first_step()), std::move(reason), now, out);
}

void JobTracker::AbortAt(Step step, std::string reason, absl::Time now, Decisions* out) {
  state_ = JobState::kAborted;
  abort_reason_ = std::move(reason);
  abort_step_ = step;
  for (RankId rank : JoinedRanks()) {
    out->deliveries.push_back({rank, AbortNotice{generation_, step, abort_reason_}});
  }
  Event e = MakeEvent(EventKind::kAbort, now);
  e.step = step;
  e.detail = abort_reason_;
  out->events.push_back(std::move(e));
}

// ---------------------------------------------------------------------------------------------
// SyncDone

absl::Status JobTracker::CheckSyncDone(RankId rank, size_t i, const SyncDoneItem& item,
                                       bool* duplicate, Decisions* out, absl::Time now) const {
  *duplicate = false;
  // The field an error names; built only for an error.
  const auto where = [i] { return absl::StrCat("items[", i, "]"); };
  if (item.chunk >= plan_.num_chunks()) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ".chunk ", item.chunk,
                                                   " out of range [0, ", plan_.num_chunks(), ")"));
  }
  const ChunkPart* part = plan_.part(rank, item.chunk);
  if (part == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ".chunk ", item.chunk, ": rank ", rank,
                                                   " is in no sync group of chunk ", item.chunk));
  }
  for (size_t j = 0; j < item.checksums.size(); ++j) {
    const std::string& group = item.checksums[j].group;
    const bool member = std::any_of(part->groups.begin(), part->groups.end(),
                                    [&](const GroupDecl& g) { return g.name == group; });
    // At most max_groups_per_chunk checksums: compared pairwise.
    const bool repeated = std::any_of(item.checksums.begin(), item.checksums.begin() + j,
                                      [&](const GroupChecksum& g) { return g.group == group; });
    if (!member || repeated) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ".checksums[", j, "].group '", group, "' is ",
          member ? "listed twice" : absl::StrCat("not a sync group of rank ", rank, " in chunk ",
                                                 item.chunk)));
    }
  }
  const Step current = rank_step(rank);
  auto st = steps_.find(item.step);
  const ChunkStep* cs = nullptr;
  if (st != steps_.end()) {
    auto found = st->second.chunks.find(item.chunk);
    if (found != st->second.chunks.end()) cs = &found->second;
  }
  // A member that contributes nothing to a chunk can receive its directive for a later step
  // while it still finishes its own step: that SyncDone is accepted.
  // A chunk a resuming rank re-announced was released by the coordinator before a restart.
  const bool released = cs != nullptr && (cs->released || cs->synced_before);
  if (item.step > current && !released) {
    return absl::FailedPreconditionError(absl::StrCat(
        where(), ": SyncDone before the directive: step ", item.step, " chunk ", item.chunk,
        " has not been released (rank ", rank, " is at step ", current, ")"));
  }
  if (st == steps_.end() && item.step < current) {
    return absl::OutOfRangeError(absl::StrCat(where(), ".step ", item.step,
                                              " is before the oldest retained step ",
                                              steps_.empty() ? current : steps_.begin()->first));
  }
  if (!released) {
    // A rank that executed a sync nobody released gathered buffers not every contributor staged.
    std::vector<std::string> missing;
    plan_.chunk(item.chunk).ForEachContributor([&](const Contributor& who) {
      if (cs == nullptr || !cs->staged.contains(who)) missing.push_back(Describe(who));
    });
    Event v = MakeEvent(EventKind::kViolation, now);
    v.step = item.step;
    v.chunk = item.chunk;
    v.rank = rank;
    v.detail = absl::StrCat("early sync: rank ", rank, " synced step ", item.step, " chunk ",
                            item.chunk, " before its release; not staged: ",
                            missing.empty() ? "(plan incomplete)" : absl::StrJoin(missing, ", "));
    out->events.push_back(std::move(v));
    return absl::FailedPreconditionError(absl::StrCat(
        where(), ": SyncDone before the directive: step ", item.step, " chunk ", item.chunk,
        " has not been released"));
  }
  if (const std::optional<GroupChecksums> done = cs->done.Find(rank); done.has_value()) {
    if (*done == SortedByGroup(item.checksums)) {
      *duplicate = true;
      return absl::OkStatus();
    }
    Event v = MakeEvent(EventKind::kViolation, now);
    v.step = item.step;
    v.chunk = item.chunk;
    v.rank = rank;
    v.detail = absl::StrCat("conflicting duplicate SyncDone: checksums ",
                            ChecksumsText(item.checksums), " after ", ChecksumsText(*done));
    out->events.push_back(std::move(v));
    return absl::AlreadyExistsError(absl::StrCat(where(), ": rank ", rank, " already reported SyncDone for step ",
                                                 item.step, " chunk ", item.chunk, " with checksums ",
                                                 ChecksumsText(*done)));
  }
  return absl::OkStatus();
}

absl::Status JobTracker::SyncDone(RankId rank, uint64_t generation,
                                  absl::Span<const SyncDoneItem> items, absl::Time now,
                                  Decisions* out) {
  if (auto s = CheckBatch(rank, generation, items.size()); !s.ok()) return s;
  // Items are judged in order: the first bad one names the error.
  const ptrdiff_t repeat = FirstRepeat(items, [](const SyncDoneItem& item) {
    return std::pair<Step, ChunkId>(item.step, item.chunk);
  });
  absl::InlinedVector<bool, 16> fresh(items.size(), false);
  for (size_t i = 0; i < items.size(); ++i) {
    if (static_cast<ptrdiff_t>(i) == repeat) {
      return absl::InvalidArgumentError(absl::StrCat("items[", i, "] repeats an earlier item (step ",
                                                     items[i].step, " chunk ", items[i].chunk, ")"));
    }
    bool duplicate = false;
    if (auto s = CheckSyncDone(rank, i, items[i], &duplicate, out, now); !s.ok()) return s;
    fresh[i] = !duplicate;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const SyncDoneItem& item = items[i];
    if (!fresh[i]) continue;
    ChunkStep& cs = ChunkStepFor(item.step, item.chunk);
    cs.done.Insert(rank, SortedByGroup(item.checksums));
    if (item.executions > 1) {
      Event v = MakeEvent(EventKind::kViolation, now);
      v.step = item.step;
      v.chunk = item.chunk;
      v.rank = rank;
      v.sequence = cs.sequence;
      v.detail = absl::StrCat("repeated sync: rank ", rank, " executed the sync of step ",
                              item.step, " chunk ", item.chunk, " ", item.executions, " times");
      out->events.push_back(std::move(v));
    }
    Event e = MakeEvent(EventKind::kSyncDone, now);
    e.step = item.step;
    e.chunk = item.chunk;
    e.rank = rank;
    e.sequence = cs.sequence;
    out->events.push_back(std::move(e));
    // After a coordinator restart a SyncDone may come before the plan is complete or the chunk
    // is released again; MaybeRelease() then records the completion.
    if (plan_.complete() && cs.released &&
        cs.done.size() == plan_.chunk(item.chunk).members.size()) {
      Event c = MakeEvent(EventKind::kSyncComplete, now);
      c.step = item.step;
      c.chunk = item.chunk;
      c.sequence = cs.sequence;
      c.duration = now - cs.released_at;
      c.detail = absl::StrCat("all ", cs.done.size(), " ranks synced in ",
                              absl::FormatDuration(now - cs.released_at));
      out->events.push_back(std::move(c));
      CheckChecksums(item.step, item.chunk, cs, now, out);
    }
  }
  MaybeAdvance(rank, now, out);
  return absl::OkStatus();
}

void JobTracker::CheckChecksums(Step step, ChunkId chunk, const ChunkStep& cs, absl::Time now,
                                Decisions* out) const {
  // One pass, no allocation per rank: the first checksum seen per group. Only a group that
  // disagrees needs the per-checksum rank lists of the report below.
  absl::flat_hash_map<absl::string_view, uint64_t> first;
  first.reserve(plan_.chunk(chunk).groups.size());
  bool mismatch = false;
  cs.done.ForEach([&](RankId, const GroupChecksums& checksums) {
    for (const GroupChecksum& g : checksums) {
      auto [it, inserted] = first.try_emplace(g.group, g.checksum);
      mismatch |= !inserted && it->second != g.checksum;
    }
  });
  if (!mismatch) return;
  // group -> checksum -> ranks
  std::map<std::string, std::map<uint64_t, std::vector<RankId>>> by_group;
  cs.done.ForEach([&](RankId rank, const GroupChecksums& checksums) {
    for (const GroupChecksum& g : checksums) by_group[g.group][g.checksum].push_back(rank);
  });
  for (auto& [group, values] : by_group) {
    if (values.size() <= 1) continue;
    std::vector<std::string> parts;
    for (auto& [value, ranks] : values) {
      std::sort(ranks.begin(), ranks.end());
      parts.push_back(absl::StrFormat("%#x from ranks [%s]", value, absl::StrJoin(ranks, ",")));
    }
    Event v = MakeEvent(EventKind::kViolation, now);
    v.step = step;
    v.chunk = chunk;
    v.sequence = cs.sequence;
    v.detail = absl::StrCat("checksum mismatch in group '", group, "': ", absl::StrJoin(parts, "; "));
    out->events.push_back(std::move(v));
  }
}

std::vector<ChunkId> JobTracker::ChunksSyncedBy(RankId rank) const {
  if (plan_.complete()) return plan_.synced_chunks(rank);
  std::vector<ChunkId> chunks;
  if (const RankPlan* own = plan_.rank_plan(rank); own != nullptr) {
    for (const ChunkPart& part : own->chunks) chunks.push_back(part.chunk);
  }
  return chunks;
}

void JobTracker::MaybeAdvance(RankId rank, absl::Time now, Decisions* out) {
  std::vector<ChunkId> own;  // while the plan forms; once complete the plan's list is used as is
  const std::vector<ChunkId>& mine =
      plan_.complete() ? plan_.synced_chunks(rank) : (own = ChunksSyncedBy(rank));
  if (mine.empty()) return;
  RankState& state = ranks_[rank];
  // SyncDones reported ahead (see CheckSyncDone) may finish several steps at once.
  bool advanced = false;
  for (auto st = steps_.find(state.step); st != steps_.end(); st = steps_.find(state.step)) {
    for (ChunkId c : mine) {
      auto cs = st->second.chunks.find(c);
      if (cs == st->second.chunks.end() || !cs->second.done.contains(rank)) {
        if (advanced) Trim();
        return;
      }
    }
    SetRankStep(state, state.step + 1);
    advanced = true;
  }
  if (advanced) Trim();
}

void JobTracker::Trim() {
  Step lowest = LowestRankStep(~Step{0});
  if (!plan_.complete()) lowest = std::min(lowest, plan_.first_step());
  const Step keep_from = lowest > options_.history_steps ? lowest - options_.history_steps : 0;
  while (!steps_.empty() && steps_.begin()->first < keep_from) steps_.erase(steps_.begin());
}

// ---------------------------------------------------------------------------------------------
// Queries

std::vector<Notice> JobTracker::Pending(RankId rank) const {
  std::vector<Notice> out;
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return out;
  if (state_ == JobState::kAborted) {
    out.push_back(AbortNotice{generation_, abort_step_, abort_reason_});
    return out;
  }
  // Skips this rank voted for: the StepSkipped may have been lost with an earlier Session (the
  // skip moved the rank past the step at once). The client drops repeats.
  for (auto st = steps_.begin(); st != steps_.end() && st->first < it->second.step; ++st) {
    if (st->second.skipped && st->second.skip_votes.contains(rank)) {
      out.push_back(StepSkipped{generation_, st->first});
    }
  }
  for (auto st = steps_.lower_bound(it->second.step); st != steps_.end(); ++st) {
    for (const auto& [chunk, cs] : st->second.chunks) {
      if (!cs.released || cs.done.contains(rank)) continue;
      const std::vector<RankId>& members = plan_.chunk(chunk).members;
      if (!std::binary_search(members.begin(), members.end(), rank)) continue;
      out.push_back(SyncDirective{generation_, st->first, chunk, cs.sequence, cs.last,
                                  cs.released_at - cs.first_checkin});
    }
  }
  return out;
}

bool JobTracker::ChunkFinished(Step step, ChunkId chunk) const {
  auto st = steps_.find(step);
  if (st == steps_.end()) return false;
  if (st->second.skipped) return true;
  auto cs = st->second.chunks.find(chunk);
  return cs != st->second.chunks.end() && cs->second.released &&
         cs->second.done.size() == plan_.chunk(chunk).members.size();
}

JobSnapshot JobTracker::Snapshot(absl::Time now, absl::Duration lists_after) const {
  JobSnapshot snap;
  snap.job_id = job_id_.str();
  snap.generation = generation_;
  snap.state = state_;
  snap.world_size = plan_.world_size();
  snap.num_chunks = plan_.num_chunks();
  snap.ranks_joined = static_cast<uint32_t>(plan_.ranks_joined());
  snap.abort_reason = abort_reason_;
  const Step lowest = LowestRankStep(plan_.first_step());
  snap.min_rank_step = lowest;
  for (ChunkId c = 0; c < plan_.num_chunks(); ++c) {
    const ChunkInfo& info = plan_.chunk(c);
    ChunkSnapshot chunk;
    chunk.chunk = c;
    Step step = ~Step{0};
    if (info.members.empty() || (plan_.complete() && info.members.size() == ranks_.size())) {
      step = lowest;  // the whole job has joined and every rank is a member
    } else {
      for (RankId m : info.members) step = std::min(step, rank_step(m));
    }
    while (ChunkFinished(step, c)) ++step;
    chunk.step = step;
    const ChunkStep* cs = nullptr;
    if (auto st = steps_.find(step); st != steps_.end()) {
      if (auto f = st->second.chunks.find(c); f != st->second.chunks.end()) cs = &f->second;
    }
    if (cs == nullptr || cs->staged.empty()) {
      chunk.state = "IDLE";
    } else if (!cs->released) {
      chunk.state = "WAITING";
      chunk.waiting = now - cs->first_checkin;
    } else {
      chunk.state = "RELEASED";
      chunk.waiting = now - cs->released_at;
    }
    if (chunk.waiting > lists_after) {
      info.ForEachContributor([&](const Contributor& who) {
        if (cs != nullptr && cs->staged.contains(who)) {
          chunk.staged.push_back(who);
        } else {
          chunk.missing.push_back(who);
        }
      });
      if (chunk.state == "RELEASED") {
        for (RankId m : info.members) {
          if (!cs->done.contains(m)) chunk.sync_pending.push_back(m);
        }
      }
    }
    snap.chunks.push_back(std::move(chunk));
  }
  return snap;
}

absl::StatusOr<ChunkSnapshot> JobTracker::ChunkAt(Step step, ChunkId chunk, absl::Time now) const {
  if (chunk >= plan_.num_chunks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", chunk, " out of range [0, ", plan_.num_chunks(), ")"));
  }
  const ChunkInfo& info = plan_.chunk(chunk);
  ChunkSnapshot snap;
  snap.chunk = chunk;
  snap.step = step;
  auto st = steps_.find(step);
  if (st == steps_.end()) {
    // The lowest step a rank still runs (first_step while the job forms), as in Trim().
    const Step lowest =
        plan_.complete() ? LowestRankStep(~Step{0}) : plan_.first_step();
    const Step oldest = steps_.empty() ? lowest : std::min(lowest, steps_.begin()->first);
    if (step < oldest) {
      return absl::OutOfRangeError(
          absl::StrCat("step ", step, " is before the oldest retained step ", oldest));
    }
    snap.state = "IDLE";
    info.ForEachContributor([&](const Contributor& who) { snap.missing.push_back(who); });
    return snap;
  }
  if (st->second.skipped) {
    snap.state = "SKIPPED";
    return snap;
  }
  const ChunkStep* cs = nullptr;
  if (auto f = st->second.chunks.find(chunk); f != st->second.chunks.end()) cs = &f->second;
  info.ForEachContributor([&](const Contributor& who) {
    if (cs != nullptr) {
      if (const std::optional<StagedMark> found = cs->staged.Find(who); found.has_value()) {
        snap.staged.push_back(who);
        snap.staged_after.push_back(found->at() - cs->first_checkin);
        return;
      }
    }
    snap.missing.push_back(who);
  });
  if (cs == nullptr || cs->staged.empty()) {
    snap.state = "IDLE";
  } else if (!cs->released) {
    snap.state = "WAITING";
    snap.waiting = now - cs->first_checkin;
  } else {
    for (RankId m : info.members) {
      if (!cs->done.contains(m)) snap.sync_pending.push_back(m);
    }
    snap.state = snap.sync_pending.empty() ? "SYNCED" : "RELEASED";
    snap.waiting = now - cs->released_at;
  }
  return snap;
}

const char* ViolationKind(const Event& e) {
  if (absl::StartsWith(e.detail, "early sync")) return "early_sync";
  if (absl::StartsWith(e.detail, "repeated sync")) return "repeated_sync";
  if (absl::StartsWith(e.detail, "checksum mismatch")) return "checksum_mismatch";
  if (absl::StartsWith(e.detail, "conflicting duplicate")) return "conflicting_duplicate";
  if (absl::StartsWith(e.detail, "skip disagreement")) return "skip_disagreement";
  return "other";
}

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kJoin: return "join";
    case EventKind::kGeneration: return "generation";
    case EventKind::kCheckin: return "checkin";
    case EventKind::kDuplicate: return "duplicate";
    case EventKind::kRelease: return "release";
    case EventKind::kSyncDone: return "sync_done";
    case EventKind::kSyncComplete: return "sync_complete";
    case EventKind::kSkipVote: return "skip_vote";
    case EventKind::kStepSkipped: return "step_skipped";
    case EventKind::kViolation: return "violation";
    case EventKind::kAbort: return "abort";
    case EventKind::kRejected: return "rejected";
    case EventKind::kStall: return "stall";
    case EventKind::kRankLost: return "rank_lost";
  }
  return "unknown";
}

}  // namespace psync::core
