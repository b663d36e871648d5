// JobTracker::StageMerged: one check-in of several ranks (job_tracker.h), and its two parts for
// an owner applying several chunks at once (OpenInSlots, StageInSlots). The common case is
// decided here without building a message or looking anything up twice; every other rank goes
// through Stage (job_tracker_stage.cc), which names its error exactly as for a rank on its own.
// Part of JobTracker; thread-compatible, except that StageInSlots calls for different chunks may
// run at once (job_tracker.h).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "server/core/job_tracker.h"

namespace psync::core {
namespace {

// How many ranks ahead of the one being recorded a group's loop starts loading marks: enough
// loads in flight to cover a miss to memory, few enough to stay in the first-level cache.
constexpr size_t kPrefetchAhead = 8;

// The fewest consecutive ranks whose check-ins are recorded as a run (JobTracker::FreshRun): a
// node's ranks (8, most often), where their messages come in rank order.
constexpr size_t kMinRun = 4;

// How many ranks from ranks[i] on are consecutive (ranks[i], ranks[i] + 1, ...).
size_t ConsecutiveFrom(absl::Span<const RankId> ranks, size_t i) {
  size_t n = 1;
  while (i + n < ranks.size() && ranks[i + n] == ranks[i] + n) ++n;
  return n;
}

}  // namespace

std::optional<JobTracker::InSlots> JobTracker::InSlotsFor(uint64_t generation,
                                                          const StagedItem& item) const {
  // What holds for the whole group: the chunk's slots once the plan is complete, and whether the
  // step may be skipped (Stage never adds a skip vote, so this holds through a group).
  if (!plan_.complete() || item.chunk >= plan_.num_chunks() || generation != generation_ ||
      state_ == JobState::kAborted || MaySkip(item.step)) {
    return std::nullopt;
  }
  const ChunkSlots* slots = &plan_.chunk(item.chunk).slots;
  // The item's optimizer among the chunk's, found once for the group (none: Stage says why).
  const std::optional<uint32_t> optimizer = slots->OptimizerIndex(item.optimizer);
  if (!optimizer.has_value()) return std::nullopt;
  return InSlots{slots, *optimizer};
}

std::optional<uint32_t> JobTracker::FreshSlot(const InSlots& where, const ChunkStep* cs, Step step,
                                              RankId rank) const {
  if (KnownStep(rank) != step) return std::nullopt;
  const std::optional<uint32_t> slot = where.slots->ContributorSlotAt(rank, where.optimizer);
  // A chunk-step started while the plan formed keeps its marks by key: Stage inserts there.
  if (slot.has_value() && cs != nullptr &&
      (cs->staged.slots() != where.slots || cs->staged.PresentAtSlot(*slot))) {
    return std::nullopt;  // a duplicate, or a conflicting one: Stage says which
  }
  return slot;
}

void JobTracker::PrefetchCheckin(const InSlots& where, const ChunkStep* cs, RankId rank) const {
  if (rank < rank_steps_.size()) __builtin_prefetch(&rank_steps_[rank]);
  if (cs == nullptr || cs->staged.slots() != where.slots) return;
  if (const std::optional<uint32_t> slot = where.slots->ContributorSlotAt(rank, where.optimizer);
      slot.has_value()) {
    cs->staged.PrefetchSlot(*slot);
  }
}

ChunkStep* JobTracker::FindChunkStep(Step step, ChunkId chunk) {
  return const_cast<ChunkStep*>(std::as_const(*this).FindChunkStep(step, chunk));
}

const ChunkStep* JobTracker::FindChunkStep(Step step, ChunkId chunk) const {
  auto st = steps_.find(step);
  if (st == steps_.end()) return nullptr;
  auto it = st->second.chunks.find(chunk);
  return it == st->second.chunks.end() ? nullptr : &it->second;
}

std::optional<ChunkSlots::SlotRun> JobTracker::FreshRun(const InSlots& where, const ChunkStep* cs,
                                                        Step step, RankId first,
                                                        uint32_t count) const {
  const std::optional<ChunkSlots::SlotRun> run =
      where.slots->ContributorSlotsOfRun(first, count, where.optimizer);
  if (!run.has_value() || (cs != nullptr && cs->staged.slots() != where.slots)) return std::nullopt;
  for (uint32_t k = 0; k < count; ++k) {
    if (KnownStep(first + k) != step) return std::nullopt;
  }
  for (uint32_t k = 0, slot = run->first; cs != nullptr && k < count; ++k, slot += run->stride) {
    if (cs->staged.PresentAtSlot(slot)) return std::nullopt;
  }
  return run;
}

size_t JobTracker::FreshRunFrom(const InSlots& where, const ChunkStep* cs, Step step,
                                absl::Span<const RankId> ranks, size_t i, size_t* no_run_before,
                                ChunkSlots::SlotRun* run) const {
  if (i < *no_run_before) return 0;
  const size_t n = ConsecutiveFrom(ranks, i);
  if (n >= kMinRun) {
    if (const std::optional<ChunkSlots::SlotRun> fresh =
            FreshRun(where, cs, step, ranks[i], static_cast<uint32_t>(n));
        fresh.has_value()) {
      *run = *fresh;
      return n;
    }
  }
  *no_run_before = i + n;
  return 0;
}

void JobTracker::RecordRunInSlots(ChunkStep& cs, ChunkSlots::SlotRun run, const StagedItem& item,
                                  absl::Span<const RankId> ranks, size_t rest, absl::Time now,
                                  size_t* record, Decisions* out) {
  cs.staged.InsertRunAtSlots(run.first, run.stride, static_cast<uint32_t>(ranks.size()),
                             StagedMark(item.checksum, now));
  NoteLastCheckin(cs, item, ranks.back(), now);
  for (size_t k = 0; k < ranks.size(); ++k) {
    JoinCheckinRecord(item, ranks[k], rest + ranks.size() - k - 1, now, record, out);
  }
}

void JobTracker::NoteLastCheckin(ChunkStep& cs, const StagedItem& item, RankId rank,
                                 absl::Time now) {
  if (cs.first_checkin == absl::InfinitePast()) cs.first_checkin = now;
  cs.last_checkin = now;
  cs.last.rank = rank;
  if (cs.last.optimizer != item.optimizer) cs.last.optimizer = item.optimizer;
}

void JobTracker::RecordInSlot(ChunkStep& cs, uint32_t slot, const StagedItem& item, RankId rank,
                              size_t rest, absl::Time now, size_t* record, Decisions* out) {
  cs.staged.InsertAtSlot(slot, StagedMark(item.checksum, now));
  NoteLastCheckin(cs, item, rank, now);
  JoinCheckinRecord(item, rank, rest, now, record, out);
}

void JobTracker::JoinCheckinRecord(const StagedItem& item, RankId rank, size_t rest, absl::Time now,
                                   size_t* record, Decisions* out) {
  if (out->merge_rank_events && *record != SIZE_MAX && *record + 1 == out->events.size()) {
    Event& e = out->events[*record];
    if (e.rank.has_value()) {
      e.ranks.reserve(rest + 2);  // the rest of the group joins it, most often
      e.ranks.push_back(*e.rank);
      e.rank.reset();
    }
    e.ranks.push_back(rank);
    return;
  }
  AppendRankEvent(EventKind::kCheckin, now, item.step, item.chunk, rank, item.optimizer,
                  /*sequence=*/0, out);
  // The record this check-in made or joined, when it is the last event.
  *record = out->merge_rank_events && out->merge_run.last + 1 == out->events.size()
                ? out->merge_run.last
                : SIZE_MAX;
}

void JobTracker::StageMerged(uint64_t generation, const StagedItem& item,
                             absl::Span<const RankId> ranks, absl::Time now, Decisions* out,
                             absl::Span<absl::Status> statuses) {
  // Read again after a Stage call, which may abort the generation.
  std::optional<InSlots> where = InSlotsFor(generation, item);
  ChunkStep* cs = nullptr;   // (item.step, item.chunk) once looked up; reset after a Stage call
  bool looked_up = false;    // cs is what the lookup found (nullptr: not created yet)
  bool staged_any = false;   // a rank was inserted here, so the release is decided below
  size_t record = SIZE_MAX;  // the group's check-in record while no other event follows it
  size_t no_run_before = 0;  // ranks before it were tried as part of a run
  const StagedItem* const one = &item;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankId rank = ranks[i];
    if (where.has_value() && !looked_up) {
      looked_up = true;
      cs = FindChunkStep(item.step, item.chunk);
      for (size_t k = i + 1; k < ranks.size() && k < i + kPrefetchAhead; ++k) {
        PrefetchCheckin(*where, cs, ranks[k]);
      }
    }
    ChunkSlots::SlotRun run;
    if (const size_t n = where.has_value()
                             ? FreshRunFrom(*where, cs, item.step, ranks, i, &no_run_before, &run)
                             : 0;
        n > 0) {
      if (cs == nullptr) cs = &ChunkStepFor(item.step, item.chunk);
      RecordRunInSlots(*cs, run, item, ranks.subspan(i, n), ranks.size() - i - n, now, &record,
                       out);
      std::fill_n(statuses.begin() + i, n, absl::OkStatus());
      staged_any = true;
      i += n - 1;
      continue;
    }
    if (where.has_value() && i + kPrefetchAhead < ranks.size()) {
      PrefetchCheckin(*where, cs, ranks[i + kPrefetchAhead]);
    }
    const std::optional<uint32_t> slot =
        where.has_value() ? FreshSlot(*where, cs, item.step, rank) : std::nullopt;
    if (!slot.has_value()) {
      statuses[i] = Stage(rank, generation, absl::MakeConstSpan(one, 1), now, out);
      where = InSlotsFor(generation, item);
      cs = nullptr;
      looked_up = false;
      record = SIZE_MAX;
      continue;
    }
    if (cs == nullptr) cs = &ChunkStepFor(item.step, item.chunk);
    RecordInSlot(*cs, *slot, item, rank, ranks.size() - i - 1, now, &record, out);
    statuses[i] = absl::OkStatus();
    staged_any = true;
  }
  if (staged_any) MaybeRelease(item.step, item.chunk, now, out);
}

bool JobTracker::OpenInSlots(uint64_t generation, const StagedItem& item,
                             absl::Span<const RankId> ranks) {
  const std::optional<InSlots> where = InSlotsFor(generation, item);
  if (!where.has_value()) return false;
  const ChunkStep* cs = FindChunkStep(item.step, item.chunk);
  for (const RankId rank : ranks) {
    if (FreshSlot(*where, cs, item.step, rank).has_value()) {
      if (cs == nullptr) ChunkStepFor(item.step, item.chunk);
      return true;
    }
  }
  return false;
}

void JobTracker::StageInSlots(uint64_t generation, const StagedItem& item,
                              absl::Span<const RankId> ranks, absl::Time now, Decisions* out,
                              absl::Span<absl::Status> statuses, std::vector<uint32_t>* others) {
  const std::optional<InSlots> where = InSlotsFor(generation, item);
  // Nothing is created here: without OpenInSlots first, every rank is left to StageMerged.
  ChunkStep* cs = where.has_value() ? FindChunkStep(item.step, item.chunk) : nullptr;
  size_t record = SIZE_MAX;
  for (size_t k = 0; cs != nullptr && k < ranks.size() && k < kPrefetchAhead; ++k) {
    PrefetchCheckin(*where, cs, ranks[k]);
  }
  size_t no_run_before = 0;  // ranks before it were tried as part of a run
  for (size_t i = 0; i < ranks.size(); ++i) {
    ChunkSlots::SlotRun run;
    if (const size_t n =
            cs != nullptr ? FreshRunFrom(*where, cs, item.step, ranks, i, &no_run_before, &run) : 0;
        n > 0) {
      RecordRunInSlots(*cs, run, item, ranks.subspan(i, n), ranks.size() - i - n, now, &record,
                       out);
      std::fill_n(statuses.begin() + i, n, absl::OkStatus());
      i += n - 1;
      continue;
    }
    if (cs != nullptr && i + kPrefetchAhead < ranks.size()) {
      PrefetchCheckin(*where, cs, ranks[i + kPrefetchAhead]);
    }
    const std::optional<uint32_t> slot =
        cs != nullptr ? FreshSlot(*where, cs, item.step, ranks[i]) : std::nullopt;
    if (!slot.has_value()) {
      others->push_back(static_cast<uint32_t>(i));
      record = SIZE_MAX;  // the group's later ranks are recorded after this one's answer
      continue;
    }
    RecordInSlot(*cs, *slot, item, ranks[i], ranks.size() - i - 1, now, &record, out);
    statuses[i] = absl::OkStatus();
  }
}

}  // namespace psync::core
