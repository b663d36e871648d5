// JobTracker: joins and generations. A join merges a rank's plan (or opens a new generation on a
// restart or after an abort), issues the session id, and reconciles once the plan is complete;
// CheckSender/CheckBatch/CheckAttach decide who may send in this generation; Abort and
// AbortGeneration end one. Part of the JobTracker class (job_tracker.h); thread-compatible.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "serve/injected_faults.h"
#include "server/core/job_tracker.h"

namespace psync::core {

void JobTracker::StartGeneration(absl::Time now, absl::string_view reason, Decisions* out,
                                 uint64_t at_least, bool stale_runs) {
  const uint64_t next = std::max(generation_ + 1, at_least);
  // A generation still forming from resumes released nothing: its ranks continue their runs by
  // re-joining with their resumes (found by the deterministic simulation, seed 585), unless those
  // runs began before an abort (stale_runs).
  const bool rejoin = !stale_runs && state_ == JobState::kForming && rebuilt_;
  if (generation_ > 0 && state_ != JobState::kAborted) {  // aborted ranks already know
    for (RankId rank : JoinedRanks()) {
      out->Deliver(rank, AbortNotice{generation_, ranks_[rank].step,
                                     absl::StrCat(reason, "; join generation ", next), rejoin});
    }
  }
  // A renumbered forming generation's ranks resume; stale runs were ended by the abort the caller
  // recorded.
  if (generation_ > 0 && !rejoin && !stale_runs && generation_ >= aborted_through_) {
    aborted_through_ = generation_;
    aborted_why_ = std::string(reason);
  }
  generation_ = next;
  rebuilt_ = false;
  skipped_before_.clear();
  state_ = JobState::kForming;
  abort_reason_.clear();
  plan_ = JobPlan();
  ranks_.clear();
  rank_steps_.clear();
  rank_synced_.clear();
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
    if (std::string difference = plan_.DifferenceFromJoined(plan); !difference.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", plan.rank, " joined again with incarnation '", plan.incarnation,
          "' but a different plan (", difference, "); a changed plan needs a new incarnation"));
    }
    Event e = MakeEvent(EventKind::kJoin, now);
    e.rank = plan.rank;
    e.detail = "reconnect";
    out->events.push_back(std::move(e));
    // The rank's resume of an older generation was applied by an earlier Join whose answer it
    // lost: it is told again that its run continues here. (Found by the deterministic simulation,
    // seed 459.)
    const bool resumed =
        rebuilt_ && plan.resume.has_value() && plan.resume->generation < generation_;
    return Answer(existing->second, /*reconnect=*/true, resumed);
  }

  // A resume of a generation known aborted (the rank missed the Abort, e.g. its connection was
  // cut), or of a run that began before such an abort (it went on in a generation rebuilt from
  // resumes after it): its run cannot continue here. The rank starts again, as after the Abort.
  // (Found by the deterministic simulation, seed 302 with rank restarts: such a resume merged into
  // the generation a restarted rank had opened, beside that rank's fresh run.)
  if (plan.resume.has_value() && plan.resume->generation <= aborted_through_) {
    return absl::AbortedError(absl::StrCat(
        "job '", job_id_.str(), "' generation ", plan.resume->generation, " was aborted (",
        aborted_why_, "); join again without a resume, from generation ", generation_));
  }
  if (plan.resume.has_value() && plan.resume->restarted_after < aborted_through_) {
    return absl::AbortedError(
        absl::StrCat("job '", job_id_.str(), "': rank ", plan.rank,
                     "'s run began before generation ", aborted_through_, " was aborted (",
                     aborted_why_, "; resume.restarted_after is ", plan.resume->restarted_after,
                     "); join again without a resume, from generation ", generation_));
  }
  // A resume of a run that began after an abort this tracker never saw (another replica aborted a
  // generation and lost the job, or this coordinator restarted since): every run it holds now
  // began before that abort, which ended them. They start over; this rank's run goes on. (Found by
  // the deterministic simulation, seed 6247 against replicas: a rank restarted, the others missed
  // the Abort of their generation and the owner crashed; the new owner rebuilt the job from all of
  // their resumes, and the restarted rank waited at step 2 while the others were at step 13.)
  const bool learns_abort =
      plan.resume.has_value() && plan.resume->restarted_after > aborted_through_;
  const bool stale_runs = learns_abort && generation_ > 0 && state_ != JobState::kAborted;

  // Decide whether this join opens a new generation, then check the plan against it without
  // changing anything until the plan merges.
  std::string new_generation_reason;
  if (stale_runs) {
    new_generation_reason =
        absl::StrCat("rank ", plan.rank, " resumes a run that began after generation ",
                     plan.resume->restarted_after, " was aborted; the runs of generation ",
                     generation_, " began before it and start over");
  } else if (generation_ == 0) {
    new_generation_reason = "first join";
  } else if (state_ == JobState::kAborted) {
    new_generation_reason =
        absl::StrCat("rank ", plan.rank, " joined after abort (", abort_reason_, ")");
  } else if (state_ == JobState::kForming && existing == ranks_.end() && plan.resume.has_value() &&
             plan.resume->generation >= generation_ &&
             !serve::IsInjected(serve::Injected().repeat_generation_on_move)) {
    // A coordinator that lost the job (a new owner replica) opened a generation for a rank that
    // joined fresh before any resuming one: the job's numbering continues above what the
    // resuming ranks were in, never repeats it (the fresh ranks are aborted and join again).
    new_generation_reason = absl::StrCat("rank ", plan.rank, " resumes generation ",
                                         plan.resume->generation, ", not older than this one");
  } else if (existing != ranks_.end()) {
    new_generation_reason =
        absl::StrCat("rank ", plan.rank, " restarted (incarnation '", existing->second.incarnation,
                     "' -> '", plan.incarnation, "')");
  }
  if (new_generation_reason.empty()) {
    // Merge checks everything before it changes anything (plan.h), so no trial copy: copying the
    // plan on every Join made joining N ranks O(N^2).
    if (auto s = plan_.Merge(plan); !s.ok()) return s;
  } else {
    JobPlan trial;
    if (auto s = trial.Merge(plan); !s.ok()) return s;
    if (learns_abort) {
      aborted_through_ = plan.resume->restarted_after;
      aborted_why_ = absl::StrCat("rank ", plan.rank, "'s run began after it");
    }
    // A coordinator that never saw the job continues the generation numbering of resuming ranks,
    // and so does one that opened a generation for fresh joiners before a resuming rank came.
    StartGeneration(now, new_generation_reason, out,
                    plan.resume.has_value() ? plan.resume->generation + 1 : 0, stale_runs);
    plan_ = std::move(trial);
  }

  RankState& state = ranks_[plan.rank];
  state.incarnation = plan.incarnation;
  state.session_id = absl::StrCat("g", generation_, "-r", plan.rank, "-s", ++sessions_issued_,
                                  secret.empty() ? "" : "-", secret);
  // A rank joining a generation rebuilt from resumes without one of its own (its process started
  // again) starts where the resumed ranks are, not at first_step: their earlier steps were synced
  // with the old coordinator, and it could not catch up alone. (Found by the deterministic
  // simulation, seed 56 with rank restarts: such a rank waited at step 1 while the others were at
  // step 14.)
  Step start = plan_.first_step();
  if (!plan.resume.has_value() && rebuilt_ && !step_census_.empty()) {
    start = std::max(start, step_census_.begin()->first);
  }
  SetRankStep(plan.rank, state, start);
  state.run_from = plan.resume.has_value() ? plan_.first_step() : start;
  if (plan.resume.has_value()) ApplyResume(plan.rank, *plan.resume, now, out);
  Event e = MakeEvent(EventKind::kJoin, now);
  e.rank = plan.rank;
  e.detail = absl::StrCat(plan_.ranks_joined(), "/", plan_.world_size(), " ranks joined");
  out->events.push_back(std::move(e));

  if (plan_.complete()) {
    state_ = JobState::kRunning;
    Reconcile(now, out);
  }
  return Answer(ranks_[plan.rank], /*reconnect=*/false, plan.resume.has_value());
}

JoinResult JobTracker::Answer(const RankState& rank, bool reconnect, bool resumed) const {
  return JoinResult{generation_, rank.session_id, rank.step, reconnect, resumed, aborted_through_};
}

absl::Status JobTracker::CheckGeneration(uint64_t generation) const {
  if (generation == generation_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("generation ", generation,
                   generation < generation_ ? " is stale" : " is in the future (never issued)",
                   ": job '", job_id_.str(), "' is at generation ", generation_, "; join again"));
}

absl::Status JobTracker::CheckSender(RankId rank, uint64_t generation) const {
  if (auto s = CheckGeneration(generation); !s.ok()) return s;
  if (state_ == JobState::kAborted) {
    return absl::AbortedError(absl::StrCat("job '", job_id_.str(), "' generation ", generation_,
                                           " was aborted at step ", abort_step_, ": ",
                                           abort_reason_, "; join again"));
  }
  if (KnownStep(rank) == kNoStep && !ranks_.contains(rank)) {
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
  if (session_id.empty()) return absl::InvalidArgumentError("session_id must not be empty");
  if (plan_.world_size() > 0 && rank >= plan_.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " out of range [0, ", plan_.world_size(), ")"));
  }
  if (auto s = CheckGeneration(generation); !s.ok()) return s;
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
  const std::shared_ptr<const Notice> notice =
      Decisions::Share(AbortNotice{generation_, step, abort_reason_});
  for (RankId rank : JoinedRanks()) out->Deliver(rank, notice);
  Event e = MakeEvent(EventKind::kAbort, now);
  e.step = step;
  e.detail = abort_reason_;
  out->events.push_back(std::move(e));
}

}  // namespace psync::core
