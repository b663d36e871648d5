// JobTracker::StageMerged: one check-in of several ranks (job_tracker.h). The common case is
// decided here without building a message or looking anything up twice; every other rank goes
// through Stage (job_tracker_stage.cc), which names its error exactly as for a rank on its own.
// Part of JobTracker; thread-compatible.
#include <cstdint>
#include <optional>

#include "server/core/job_tracker.h"

namespace psync::core {

void JobTracker::StageMerged(uint64_t generation, const StagedItem& item,
                             absl::Span<const RankId> ranks, absl::Time now, Decisions* out,
                             absl::Span<absl::Status> statuses) {
  // What holds for the whole group: the chunk's slots once the plan is complete, and whether the
  // step may be skipped (Stage never adds a skip vote, so this holds through the loop).
  const ChunkSlots* slots = plan_.complete() && item.chunk < plan_.num_chunks()
                                ? &plan_.chunk(item.chunk).slots
                                : nullptr;
  const bool step_open = slots != nullptr && !MaySkip(item.step);
  // The item's optimizer among the chunk's, found once for the group (none: Stage says why).
  const std::optional<uint32_t> optimizer =
      slots != nullptr ? slots->OptimizerIndex(item.optimizer) : std::nullopt;
  ChunkStep* cs = nullptr;   // (item.step, item.chunk) once looked up; reset after a Stage call
  bool looked_up = false;    // cs is what the lookup found (nullptr: not created yet)
  bool staged_any = false;   // a rank was inserted here, so the release is decided below
  size_t record = SIZE_MAX;  // the group's check-in record while no other event follows it
  const StagedItem* const one = &item;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankId rank = ranks[i];
    std::optional<uint32_t> slot;
    if (step_open && optimizer.has_value() && generation == generation_ &&
        state_ != JobState::kAborted) {
      if (KnownStep(rank) == item.step) {
        slot = slots->ContributorSlotAt(rank, *optimizer);
      }
    }
    if (slot.has_value() && !looked_up) {
      looked_up = true;
      auto st = steps_.find(item.step);
      if (st != steps_.end()) {
        auto it = st->second.chunks.find(item.chunk);
        if (it != st->second.chunks.end()) cs = &it->second;
      }
    }
    // A chunk-step started while the plan formed keeps its marks by key: Stage inserts there.
    if (slot.has_value() && cs != nullptr &&
        (cs->staged.slots() != slots || cs->staged.PresentAtSlot(*slot))) {
      slot.reset();  // a duplicate, or a conflicting one: Stage says which
    }
    if (!slot.has_value()) {
      statuses[i] = Stage(rank, generation, absl::MakeConstSpan(one, 1), now, out);
      cs = nullptr;
      looked_up = false;
      record = SIZE_MAX;
      continue;
    }
    if (cs == nullptr) cs = &ChunkStepFor(item.step, item.chunk);
    cs->staged.InsertAtSlot(*slot, StagedMark(item.checksum, now));
    if (cs->first_checkin == absl::InfinitePast()) cs->first_checkin = now;
    cs->last_checkin = now;
    cs->last.rank = rank;
    if (cs->last.optimizer != item.optimizer) cs->last.optimizer = item.optimizer;
    if (out->merge_rank_events && record != SIZE_MAX && record + 1 == out->events.size()) {
      Event& e = out->events[record];
      if (e.rank.has_value()) {
        e.ranks.reserve(ranks.size() - i + 1);  // the rest of the group joins it, most often
        e.ranks.push_back(*e.rank);
        e.rank.reset();
      }
      e.ranks.push_back(rank);
    } else {
      AppendRankEvent(EventKind::kCheckin, now, item.step, item.chunk, rank, item.optimizer,
                      /*sequence=*/0, out);
      // The record this check-in made or joined, when it is the last event.
      if (out->merge_rank_events && out->merge_run.last + 1 == out->events.size()) {
        record = out->merge_run.last;
      }
    }
    statuses[i] = absl::OkStatus();
    staged_any = true;
  }
  if (staged_any) MaybeRelease(item.step, item.chunk, now, out);
}

}  // namespace psync::core
