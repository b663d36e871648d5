// JobTracker: recovery after a coordinator restart. ApplyResume records what a re-joining rank
// re-announced (its step, check-ins and executed syncs); Reconcile, once the plan is complete,
// counts ranks already past a step as having staged and synced it, then releases, skips and
// advances as if the coordinator had never stopped. Only declared contributors enter `staged`
// here (a resume is validated against the rank's plan; Reconcile walks the plan's contributors),
// which the release rule relies on (release_rule.h). Part of JobTracker; thread-compatible.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/core/job_tracker.h"

namespace psync::core {

void JobTracker::ApplyResume(RankId rank, const ResumeState& resume, absl::Time now,
                             Decisions* out) {
  rebuilt_ = true;
  SetRankStep(rank, ranks_[rank], resume.step);
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
    InsertDone(cs, resume.step, rank, GroupChecksums());
    cs.synced_before = true;
  }
  for (ChunkId chunk : resume.released_chunks) {
    ChunkStepFor(resume.step, chunk).synced_before = true;
  }
  skipped_before_.insert(resume.skipped_steps.begin(), resume.skipped_steps.end());
  // Released before, for a later step (seeds 1808, 2681 of the simulation).
  for (const auto& [step, chunk] : resume.released_ahead) {
    ChunkStepFor(step, chunk).synced_before = true;
  }
  // Its skip vote, acknowledged by the old coordinator: counted as if voted here (Reconcile skips
  // the step once every rank's vote is in).
  if (resume.skip_reason.has_value()) {
    StepState& state = steps_[resume.step];
    if (state.skip_votes.empty()) state.skip_reason = *resume.skip_reason;
    state.skip_votes.insert(rank);
  }
  // A rank that synced every chunk it takes part in has finished the step: it may check in for
  // the next one while the other ranks are still re-joining.
  const std::vector<ChunkId> mine = ChunksSyncedBy(rank);
  const bool finished = !mine.empty() && std::all_of(mine.begin(), mine.end(), [&](ChunkId chunk) {
    return std::find(resume.synced_chunks.begin(), resume.synced_chunks.end(), chunk) !=
           resume.synced_chunks.end();
  });
  if (finished) SetRankStep(rank, ranks_[rank], resume.step + 1);
  Event e = MakeEvent(EventKind::kJoin, now);
  e.rank = rank;
  e.step = resume.step;
  e.detail =
      absl::StrCat("resumed at step ", resume.step, " with ", resume.staged.size(), " check-ins, ",
                   resume.synced_chunks.size(), " synced and ", resume.released_chunks.size(),
                   " released chunks", resume.skip_reason.has_value() ? ", a skip vote" : "");
  out->events.push_back(std::move(e));
}

void JobTracker::CountRanksPast(Step step, ChunkId chunk, ChunkStep& cs, absl::Time now) {
  cs.ranks_past_counted = true;
  // No rank is past the step (the usual case once the job runs again): nothing to count. A rank
  // that passes it later does so by finishing it here.
  if (step_census_.empty() || step_census_.rbegin()->first <= step) return;
  const ChunkInfo& info = plan_.chunk(chunk);
  info.ForEachContributor([&](const Contributor& who) {
    if (rank_step(who.rank) > step && cs.staged.Insert(who, StagedMark(std::nullopt, now))) {
      if (cs.first_checkin == absl::InfinitePast()) cs.first_checkin = now;
    }
  });
  for (RankId member : info.members) {
    if (rank_step(member) > step) InsertDone(cs, step, member, GroupChecksums());
  }
}

bool JobTracker::MaySkip(Step step) const {
  if (skipped_before_.count(step) > 0) return true;
  auto st = steps_.find(step);
  return st != steps_.end() && (st->second.skipped || !st->second.skip_votes.empty());
}

void JobTracker::Reconcile(absl::Time now, Decisions* out) {
  // Each rank waits at its step for the chunks it syncs. One it syncs without staging in it has no
  // state here when every contributor is already past the step (they synced it with the old
  // coordinator, whose directive to this rank was lost with it): give it one, so that the loop
  // below releases it to this rank. Not for a step with a skip vote: the ranks past it skipped it
  // (every rank voted, and a resume carries its rank's vote from the moment it was sent).
  // (Found by the deterministic simulation, seed 51.)
  for (RankId rank : JoinedRanks()) {
    const Step step = rank_step(rank);
    if (MaySkip(step)) continue;
    for (ChunkId chunk : plan_.synced_chunks(rank)) ChunkStepFor(step, chunk);
  }
  // Collect first: releasing and skipping may trim steps_.
  std::vector<std::pair<Step, std::vector<ChunkId>>> pending;
  for (const auto& [step, st] : steps_) {
    pending.emplace_back(step, std::vector<ChunkId>());
    for (const auto& [chunk, cs] : st.chunks) pending.back().second.push_back(chunk);
  }
  for (const auto& [pending_step, chunks] : pending) {
    const Step step = pending_step;  // a plain variable: lambdas below capture it
    auto st = steps_.find(step);
    if (st == steps_.end()) continue;
    for (ChunkId chunk : chunks) {
      MaybeRelease(step, chunk, now, out);  // counts the ranks past the step first
    }
    MaybeSkip(step, now, out);  // counts the ranks past a step with a vote as its voters
  }
  for (RankId rank : JoinedRanks()) MaybeAdvance(rank, now, out);
}

}  // namespace psync::core
