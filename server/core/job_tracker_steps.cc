// JobTracker: a rank's step. CheckNotAhead refuses inputs for steps the rank has not reached
// (naming the chunks it still has to finish); MaybeAdvance moves a rank past every step whose
// syncs it reported done; Trim drops steps older than the history window behind the lowest rank.
// Part of JobTracker (job_tracker.h); thread-compatible.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/job_tracker.h"

namespace psync::core {

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
    return absl::OutOfRangeError(
        absl::StrCat(field, " ", step, " is too far ahead: rank ", rank, " is at step ", current));
  }
  return absl::OkStatus();
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
  // The rank's state is read only to move it (most SyncDones do not): its step is KnownStep's.
  RankState* state = nullptr;
  Step step = KnownStep(rank);
  if (step == kNoStep) {
    state = &ranks_[rank];
    step = state->step;
  } else if (plan_.complete() && rank_synced_[rank] < mine.size()) {
    // Once the plan is complete every SyncDone recorded is of a chunk in `mine` (only its members
    // report one), so fewer of them at the rank's step than `mine` means a chunk is missing.
    return;
  }
  // SyncDones reported ahead (see CheckSyncDone) may finish several steps at once.
  bool advanced = false;
  for (auto st = steps_.find(step); st != steps_.end(); st = steps_.find(step)) {
    const bool finished = std::all_of(mine.begin(), mine.end(), [&](ChunkId c) {
      auto cs = st->second.chunks.find(c);
      return cs != st->second.chunks.end() && cs->second.done.contains(rank);
    });
    if (!finished) break;
    if (state == nullptr) state = &ranks_[rank];
    SetRankStep(rank, *state, ++step);
    advanced = true;
  }
  if (!advanced) return;
  Trim();
  // In a rebuilt job a rank reaching a step may wait there for a chunk whose contributors all
  // finished it with the old coordinator, which nothing else would look at again: the release
  // rule does, counting the ranks past it. (Found by the deterministic simulation, seed 906.)
  if (rebuilt_) {
    for (ChunkId chunk : mine) MaybeRelease(step, chunk, now, out);
  }
}

void JobTracker::Trim() {
  Step lowest = LowestRankStep(~Step{0});
  if (!plan_.complete()) lowest = std::min(lowest, plan_.first_step());
  const Step keep_from = lowest > options_.history_steps ? lowest - options_.history_steps : 0;
  while (!steps_.empty() && steps_.begin()->first < keep_from) steps_.erase(steps_.begin());
  skipped_before_.erase(skipped_before_.begin(), skipped_before_.lower_bound(keep_from));
}

}  // namespace psync::core
