// JobTracker: skips (found_inf, grad-norm threshold). Skip records one rank's vote, or aborts the
// generation when the step already has check-ins (a skip disagreement); MaybeSkip skips the step
// for every rank once all of them voted and the plan is complete. Part of JobTracker;
// thread-compatible.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/core/job_tracker.h"

namespace psync::core {

absl::Status JobTracker::Skip(RankId rank, uint64_t generation, Step step, absl::string_view reason,
                              absl::Time now, Decisions* out) {
  if (auto s = CheckSender(rank, generation); !s.ok()) return s;
  if (reason.size() > options_.max_reason_length) {
    return absl::InvalidArgumentError(absl::StrCat("reason must be at most ",
                                                   options_.max_reason_length, " characters (got ",
                                                   reason.size(), ")"));
  }
  const Step current = rank_step(rank);
  if (step > current) return CheckNotAhead(rank, "step", step);
  auto st = steps_.find(step);
  if (step < current) {
    // A duplicate: skipped here, or (a vote re-sent after a coordinator restart) before, or no
    // longer retained (LateRepeat: a rank that voted moves past the step only once it is skipped).
    if ((st != steps_.end() && st->second.skipped) || skipped_before_.count(step) > 0 ||
        LateRepeat(rank, step)) {
      return absl::OkStatus();
    }
    if (st == steps_.end()) {
      return absl::OutOfRangeError(absl::StrCat("step ", step,
                                                " is before the oldest retained step ",
                                                steps_.empty() ? current : steps_.begin()->first));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "step ", step, " is already finished for rank ", rank, " (it is at step ", current, ")"));
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
                      absl::StrCat("skip disagreement at step ", step, ": rank ", rank, " skips (",
                                   reason, ") but ", stagers.size(),
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
  // In a rebuilt job the ranks already past a step with a vote skipped it with the old
  // coordinator (past it means skipped: a skip vote beside a check-in aborts): they are voters.
  if (rebuilt_ && plan_.complete() && MaySkip(step)) {
    StepState& voted = steps_[step];
    for (RankId rank : JoinedRanks()) {
      if (rank_step(rank) > step) voted.skip_votes.insert(rank);
    }
  }
  auto st = steps_.find(step);
  if (!plan_.complete() || st == steps_.end() || st->second.skipped ||
      st->second.skip_votes.size() < plan_.world_size()) {
    return;
  }
  st->second.skipped = true;
  const std::shared_ptr<const Notice> skipped = Decisions::Share(StepSkipped{generation_, step});
  for (RankId rank : JoinedRanks()) {
    out->Deliver(rank, skipped);
    // A rank of a rebuilt job may already be past the step (it saw it skipped before): it stays
    // where it is. (Found by the deterministic simulation, seed 13 with rank restarts: ranks at
    // step 10 were sent back to step 3 and their check-ins refused.)
    if (rank_step(rank) <= step) SetRankStep(rank, ranks_[rank], step + 1);
  }
  Event e = MakeEvent(EventKind::kStepSkipped, now);
  e.step = step;
  e.detail = st->second.skip_reason;
  out->events.push_back(std::move(e));
  Trim();
}

}  // namespace psync::core
