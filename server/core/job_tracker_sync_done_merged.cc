// JobTracker::SyncDonesInSlots: one SyncDone of several ranks (job_tracker.h), recorded as
// SyncDoneInSlot records each (job_tracker_sync_done.cc), with what holds for the whole group
// looked up once. Part of JobTracker; thread-compatible.
#include <optional>
#include <string>

#include "server/core/job_tracker.h"

namespace psync::core {
namespace {

// How many ranks ahead of the one being recorded the loop starts loading the rank's step: enough
// loads in flight to cover a miss to memory.
constexpr size_t kPrefetchAhead = 8;

// A SyncDone names no optimizer.
const std::string& NoOptimizer() {
  static const std::string* const none = new std::string();
  return *none;
}

}  // namespace

ChunkStep* JobTracker::ReleasedInSlots(uint64_t generation, const SyncDoneItem& item) {
  // SyncDoneInSlot's checks that do not depend on the rank.
  if (generation != generation_ || state_ == JobState::kAborted || !plan_.complete() ||
      options_.max_batch_items < 1 || item.chunk >= plan_.num_chunks() || item.executions > 1 ||
      item.checksums.size() > 1) {
    return nullptr;
  }
  ChunkStep* cs = FindChunkStep(item.step, item.chunk);
  if (cs == nullptr || !(cs->released || cs->synced_before) ||
      cs->done.slots() != &plan_.chunk(item.chunk).slots) {
    return nullptr;
  }
  return cs;
}

size_t JobTracker::SyncDonesInSlots(uint64_t generation, const SyncDoneItem& item,
                                    absl::Span<const RankId> ranks, absl::Time now,
                                    Decisions* out) {
  // Looked up again once a rank moves to its next step, which may trim old steps.
  ChunkStep* cs = ReleasedInSlots(generation, item);
  // A group that the item's one checksum was found to name (a member's slot points to its name).
  const std::string* named_group = nullptr;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (cs == nullptr) return i;
    const RankId rank = ranks[i];
    if (i + kPrefetchAhead < ranks.size() && ranks[i + kPrefetchAhead] < rank_steps_.size()) {
      __builtin_prefetch(&rank_steps_[ranks[i + kPrefetchAhead]]);
    }
    const Step known = KnownStep(rank);
    if (known == kNoStep) return i;
    const ChunkSlots& slots = *cs->done.slots();
    const std::optional<uint32_t> slot = slots.MemberSlot(rank);
    if (!slot.has_value() || cs->done.PresentAtSlot(*slot)) return i;
    if (!item.checksums.empty()) {
      const std::string* only = slots.OnlyGroupOf(*slot);
      if (only == nullptr || (only != named_group && item.checksums[0].group != *only)) return i;
      named_group = only;
    }
    // As SyncDoneInSlot records it.
    InsertDone(*cs, item.step, rank, item.checksums, slot);
    AppendRankEvent(EventKind::kSyncDone, now, item.step, item.chunk, rank, NoOptimizer(),
                    cs->sequence, out);
    RecordIfSyncComplete(item.step, item.chunk, *cs, now, out);
    MaybeAdvance(rank, now, out);
    if (KnownStep(rank) != known) cs = ReleasedInSlots(generation, item);
  }
  return ranks.size();
}

}  // namespace psync::core
