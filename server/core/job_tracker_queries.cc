// JobTracker: read-only queries. Pending lists what a (re)attaching rank must hold; Snapshot
// shows every chunk's oldest unfinished step (lists only for chunks waiting past a threshold);
// ChunkAt shows one (step, chunk). They change nothing. Part of JobTracker; thread-compatible
// (const: concurrent calls are safe only while no mutating call runs).
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/core/job_tracker.h"

namespace psync::core {
namespace {

// Calls fn(staged, rank, who) for each contributor of `info` in the chunk's order (by rank),
// `staged` whether `cs` (nullptr: nothing staged) holds its check-in, `rank` its rank and `who()`
// the contributor. Once the plan is complete the chunk's slots are read in order and a contributor
// is built only where fn calls who(): lists cut to a limit cost one flag read per contributor
// beyond it.
template <typename Fn>
void VisitContributors(const ChunkInfo& info, const ChunkStep* cs, Fn fn) {
  if (cs != nullptr && cs->staged.slots() == &info.slots) {
    for (uint32_t slot = 0; slot < info.slots.num_contributors(); ++slot) {
      fn(cs->staged.PresentAtSlot(slot), info.slots.ContributorRankAt(slot),
         [&] { return info.slots.ContributorAt(slot); });
    }
    return;
  }
  info.ForEachContributor([&](const Contributor& who) {
    fn(cs != nullptr && cs->staged.contains(who), who.rank, [&] { return who; });
  });
}

// The contributors of `info` whose check-in `cs` (nullptr: nothing staged) does not hold, at most
// `list_limit` of them, by optimizer name (each optimizer's ranks sorted), without building a
// Contributor; returns how many there are in all.
uint32_t MissingByOptimizer(const ChunkInfo& info, const ChunkStep* cs, size_t list_limit,
                            std::vector<ChunkSnapshot::MissingOfOptimizer>* out) {
  uint32_t missing = 0;
  if (cs != nullptr && cs->staged.slots() == &info.slots) {
    // By the slot's optimizer index: no name compared per contributor.
    const ChunkSlots& slots = info.slots;
    out->resize(slots.num_optimizers());
    for (uint32_t i = 0; i < slots.num_optimizers(); ++i) {
      (*out)[i].optimizer = slots.OptimizerAt(i);
    }
    for (uint32_t slot = 0; slot < slots.num_contributors(); ++slot) {
      if (!cs->staged.PresentAtSlot(slot) && missing++ < list_limit) {
        (*out)[slots.ContributorOptimizerIndexAt(slot)].ranks.push_back(
            slots.ContributorRankAt(slot));
      }
    }
    out->erase(
        std::remove_if(out->begin(), out->end(), [](const auto& g) { return g.ranks.empty(); }),
        out->end());
  } else {
    info.ForEachContributor([&](const Contributor& who) {
      if ((cs != nullptr && cs->staged.contains(who)) || missing++ >= list_limit) return;
      auto group = std::find_if(out->begin(), out->end(),
                                [&](const auto& g) { return g.optimizer == who.optimizer; });
      if (group == out->end()) group = out->insert(out->end(), {who.optimizer, {}});
      group->ranks.push_back(who.rank);
    });
  }
  // A rank's optimizers then come group by group in name order, the contributors' order.
  std::sort(out->begin(), out->end(),
            [](const auto& a, const auto& b) { return a.optimizer < b.optimizer; });
  return missing;
}

// Calls fn(member) for each member of `info` that has not reported SyncDone in `cs`, by rank.
template <typename Fn>
void VisitSyncPending(const ChunkInfo& info, const ChunkStep& cs, Fn fn) {
  if (cs.done.slots() == &info.slots) {
    for (uint32_t slot = 0; slot < info.slots.num_members(); ++slot) {
      if (!cs.done.PresentAtSlot(slot)) fn(info.slots.MemberAt(slot));
    }
    return;
  }
  for (RankId m : info.members) {
    if (!cs.done.contains(m)) fn(m);
  }
}

}  // namespace

std::vector<Notice> JobTracker::NoticesToHold(RankId rank) const {
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
                                  cs.released_at - cs.first_checkin, /*epoch=*/0, cs.released_at});
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

JobSnapshot JobTracker::Snapshot(absl::Time now, absl::Duration lists_after, SnapshotLists lists,
                                 size_t list_limit) const {
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
  snap.steps_held = static_cast<uint32_t>(steps_.size());
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
    const uint32_t contributors = static_cast<uint32_t>(info.num_contributors());
    chunk.staged_count = cs == nullptr ? 0 : static_cast<uint32_t>(cs->staged.size());
    chunk.missing_count = contributors - std::min(chunk.staged_count, contributors);
    const bool all = lists == SnapshotLists::kAll;
    if (chunk.waiting > lists_after && (all || chunk.state != "IDLE")) {
      if (all || chunk.state == "WAITING") {
        uint32_t staged = 0;
        uint32_t missing = 0;
        if (all) {
          // Sized once: a list of a whole chunk's contributors grown an entry at a time moves
          // them all about twice over.
          chunk.missing.reserve(std::min<size_t>(chunk.missing_count, list_limit));
          chunk.staged.reserve(std::min<size_t>(chunk.staged_count, list_limit));
          VisitContributors(info, cs, [&](bool in, RankId, const auto& who) {
            if (!in) {
              if (missing++ < list_limit) chunk.missing.push_back(who());
            } else if (staged++ < list_limit) {
              chunk.staged.push_back(who());
            }
          });
        } else {
          missing = MissingByOptimizer(info, cs, list_limit, &chunk.missing_by_optimizer);
        }
        // Where a list is built, the counts are of what it would hold without the limit.
        chunk.missing_count = missing;
        chunk.staged_count = contributors - missing;
      }
      if (chunk.state == "RELEASED") {
        uint32_t pending = 0;
        chunk.sync_pending.reserve(std::min<size_t>(
            info.members.size() - std::min(info.members.size(), cs->done.size()), list_limit));
        VisitSyncPending(info, *cs, [&](RankId m) {
          if (pending++ < list_limit) chunk.sync_pending.push_back(m);
        });
        chunk.sync_pending_count = pending;
      }
      if (!all) chunk.members = info.members;
    }
    snap.chunks.push_back(std::move(chunk));
  }
  return snap;
}

void JobTracker::ForEachMissing(Step step, ChunkId chunk,
                                absl::FunctionRef<void(RankId)> fn) const {
  if (chunk >= plan_.num_chunks()) return;
  VisitContributors(plan_.chunk(chunk), FindChunkStep(step, chunk),
                    [&](bool in, RankId rank, const auto&) {
                      if (!in) fn(rank);
                    });
}

absl::StatusOr<ChunkSnapshot> JobTracker::ChunkAt(Step step, ChunkId chunk, absl::Time now,
                                                  size_t list_limit) const {
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
    const Step lowest = plan_.complete() ? LowestRankStep(~Step{0}) : plan_.first_step();
    const Step oldest = steps_.empty() ? lowest : std::min(lowest, steps_.begin()->first);
    if (step < oldest) {
      return absl::OutOfRangeError(
          absl::StrCat("step ", step, " is before the oldest retained step ", oldest));
    }
    snap.state = "IDLE";
    info.ForEachContributor([&](const Contributor& who) {
      if (snap.missing_count++ < list_limit) snap.missing.push_back(who);
    });
    return snap;
  }
  if (st->second.skipped) {
    snap.state = "SKIPPED";
    return snap;
  }
  const ChunkStep* cs = nullptr;
  if (auto f = st->second.chunks.find(chunk); f != st->second.chunks.end()) cs = &f->second;
  VisitContributors(info, cs, [&](bool in, RankId, const auto& who) {
    if (!in) {
      if (snap.missing_count++ < list_limit) snap.missing.push_back(who());
    } else if (snap.staged_count++ < list_limit) {
      snap.staged.push_back(who());
      snap.staged_after.push_back(cs->staged.Find(snap.staged.back())->at() - cs->first_checkin);
    }
  });
  if (cs == nullptr || cs->staged.empty()) {
    snap.state = "IDLE";
  } else if (!cs->released) {
    snap.state = "WAITING";
    snap.waiting = now - cs->first_checkin;
  } else {
    VisitSyncPending(info, *cs, [&](RankId m) {
      if (snap.sync_pending_count++ < list_limit) snap.sync_pending.push_back(m);
    });
    snap.state = snap.sync_pending_count == 0 ? "SYNCED" : "RELEASED";
    snap.waiting = now - cs->released_at;
  }
  return snap;
}

}  // namespace psync::core
