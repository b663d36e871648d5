// Who staged and who synced one (step, chunk): StagedSet (check-ins with their time and shard
// checksum) and DoneSet (SyncDones with their group checksums), with OptimizerIds, the job's
// optimizer names as small integers for keys. Once a job's plan is complete the sets keep one
// array entry per contributor or member slot of the chunk (chunk_slots.h); before, and for anyone
// the slots do not list, they fall back to hash maps, so they answer the same either way.
//
// Thread-compatible; owned by the JobTracker's step state (step_state.h). A set points to the
// ChunkSlots and OptimizerIds given to Init, which must outlive it.
#ifndef PSYNC_SERVER_CORE_CHUNK_SETS_H_
#define PSYNC_SERVER_CORE_CHUNK_SETS_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/core/chunk_slots.h"
#include "server/core/types.h"

namespace psync::core {

// The optimizer names of a job, numbered in order of first use; never shrinks (names come only
// from declared plans, which are bounded). Not thread-safe; owned by the JobTracker.
class OptimizerIds {
 public:
  uint32_t Intern(const std::string& name) {
    auto [it, added] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
    if (added) names_.push_back(name);
    return it->second;
  }
  std::optional<uint32_t> Find(const std::string& name) const {
    auto it = ids_.find(name);
    return it == ids_.end() ? std::nullopt : std::optional<uint32_t>(it->second);
  }
  const std::string& Name(uint32_t id) const { return names_[id]; }

 private:
  absl::flat_hash_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
};

// One contributor's check-in: its shard checksum (if sent) and when it arrived, in 24 bytes. A
// default-constructed mark is absent (no check-in).
class StagedMark {
 public:
  StagedMark() = default;
  StagedMark(std::optional<uint64_t> checksum, absl::Time at)
      : at_ns_(absl::ToUnixNanos(at)),
        checksum_(checksum.value_or(0)),
        has_checksum_(checksum.has_value()),
        present_(true) {}
  bool present() const { return present_; }
  std::optional<uint64_t> checksum() const {
    return has_checksum_ ? std::optional<uint64_t>(checksum_) : std::nullopt;
  }
  absl::Time at() const { return absl::FromUnixNanos(at_ns_); }

 private:
  int64_t at_ns_ = 0;
  uint64_t checksum_ = 0;
  bool has_checksum_ = false;
  bool present_ = false;
};

// Who staged one (step, chunk). Once the plan is complete (`slots` given) 17 bytes a contributor
// slot in two arrays (time and checksum, and the flags), a check-in an index computation. Before
// (a chunk-step started while ranks were still joining), and for anyone the slots do not list,
// marks are keyed by (rank, optimizer id) packed in 8 bytes. `Init` must be called before Insert.
class StagedSet {
 public:
  void Init(OptimizerIds* ids, const ChunkSlots* slots) {
    ids_ = ids;
    slots_ = slots;
    if (slots_ != nullptr) {
      by_slot_.resize(slots_->num_contributors());
      flags_.resize(slots_->num_contributors());
    }
  }
  // False (and nothing changes) when `who` is already in.
  bool Insert(const Contributor& who, StagedMark mark) {
    if (std::optional<uint32_t> slot = Slot(who); slot.has_value()) {
      return InsertAtSlot(*slot, mark);
    }
    return keyed_.try_emplace(Key(who.rank, ids_->Intern(who.optimizer)), mark).second;
  }
  // Insert for a contributor whose slot the caller looked up (ChunkSlots::ContributorSlot of the
  // slots given to Init, which must not be nullptr). False (and nothing changes) when it is in.
  bool InsertAtSlot(uint32_t slot, StagedMark mark) {
    if (flags_[slot] & kPresent) return false;
    by_slot_[slot] = {absl::ToUnixNanos(mark.at()), mark.checksum().value_or(0)};
    flags_[slot] = kPresent | (mark.checksum().has_value() ? kHasChecksum : 0);
    ++in_slots_;
    return true;
  }
  // InsertAtSlot of one mark for `count` slots, `stride` apart from `first`, none of which holds a
  // mark (the caller checked PresentAtSlot): a run of consecutive ranks' check-ins of one item.
  void InsertRunAtSlots(uint32_t first, uint32_t stride, uint32_t count, StagedMark mark) {
    const SlotMark m{absl::ToUnixNanos(mark.at()), mark.checksum().value_or(0)};
    const uint8_t flags = kPresent | (mark.checksum().has_value() ? kHasChecksum : 0);
    for (uint32_t k = 0, slot = first; k < count; ++k, slot += stride) {
      by_slot_[slot] = m;
      flags_[slot] = flags;
    }
    in_slots_ += count;
  }
  bool PresentAtSlot(uint32_t slot) const { return (flags_[slot] & kPresent) != 0; }
  // Starts loading what PresentAtSlot reads and InsertAtSlot writes for `slot`, for a loop over
  // many ranks' check-ins to do a few ranks ahead: their slots are scattered over the chunk's
  // arrays, and waiting on each in turn was most of a merged check-in's cost.
  void PrefetchSlot(uint32_t slot) const {
    __builtin_prefetch(&flags_[slot], /*rw=*/1);
    __builtin_prefetch(&by_slot_[slot], /*rw=*/1);
  }
  std::optional<StagedMark> Find(const Contributor& who) const {
    if (std::optional<uint32_t> slot = Slot(who); slot.has_value()) return AtSlot(*slot);
    std::optional<uint32_t> id = ids_ == nullptr ? std::nullopt : ids_->Find(who.optimizer);
    if (!id.has_value()) return std::nullopt;
    auto it = keyed_.find(Key(who.rank, *id));
    return it == keyed_.end() ? std::nullopt : std::optional<StagedMark>(it->second);
  }
  bool contains(const Contributor& who) const { return Find(who).has_value(); }
  size_t size() const { return in_slots_ + keyed_.size(); }
  bool empty() const { return size() == 0; }
  // The slots given to Init (nullptr before the plan was complete), and how many marks are kept
  // outside them: with slots, exactly those whom the slots do not list (release_rule.h).
  const ChunkSlots* slots() const { return slots_; }
  size_t outside_slots() const { return keyed_.size(); }
  // fn(const Contributor&, const StagedMark&) for each, in no particular order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (uint32_t s = 0; in_slots_ > 0 && s < by_slot_.size(); ++s) {
      if (flags_[s] & kPresent) fn(slots_->ContributorAt(s), *AtSlot(s));
    }
    for (const auto& [key, mark] : keyed_) {
      fn(Contributor{static_cast<RankId>(key >> 32), ids_->Name(static_cast<uint32_t>(key))}, mark);
    }
  }

 private:
  struct SlotMark {
    int64_t at_ns = 0;
    uint64_t checksum = 0;
  };
  static constexpr uint8_t kPresent = 1;
  static constexpr uint8_t kHasChecksum = 2;

  static uint64_t Key(RankId rank, uint32_t optimizer) {
    return (static_cast<uint64_t>(rank) << 32) | optimizer;
  }
  std::optional<uint32_t> Slot(const Contributor& who) const {
    return slots_ == nullptr ? std::nullopt : slots_->ContributorSlot(who.rank, who.optimizer);
  }
  std::optional<StagedMark> AtSlot(uint32_t slot) const {
    if (!(flags_[slot] & kPresent)) return std::nullopt;
    const SlotMark& m = by_slot_[slot];
    return StagedMark(
        flags_[slot] & kHasChecksum ? std::optional<uint64_t>(m.checksum) : std::nullopt,
        absl::FromUnixNanos(m.at_ns));
  }

  OptimizerIds* ids_ = nullptr;
  const ChunkSlots* slots_ = nullptr;
  std::vector<SlotMark> by_slot_;
  std::vector<uint8_t> flags_;
  size_t in_slots_ = 0;
  absl::flat_hash_map<uint64_t, StagedMark> keyed_;
};

// Who reported SyncDone for one (step, chunk), with their checksums. Once the plan is complete
// (`slots` given) 9 bytes a member slot: a member of one sync group reports one checksum, whose
// group the slot implies, so a state byte and the checksum say it all. Reports of another shape
// (several groups, a group the slot does not imply), members before the plan was complete and
// ranks the slots do not list are kept keyed by rank.
class DoneSet {
 public:
  void Init(const ChunkSlots* slots) {
    slots_ = slots;
    if (slots_ != nullptr) {
      checksum_.resize(slots_->num_members());
      state_.resize(slots_->num_members());
    }
  }
  // False (and nothing changes) when `rank` is already in. Kept sorted by group; copied only when
  // the slot does not say it all.
  bool Insert(RankId rank, absl::Span<const GroupChecksum> checksums) {
    const std::optional<uint32_t> slot = Slot(rank);
    if (!slot.has_value()) return keyed_.try_emplace(rank, SortedByGroup(checksums)).second;
    return InsertAtSlot(*slot, rank, checksums);
  }
  // Insert for member `rank` whose slot the caller looked up (ChunkSlots::MemberSlot of the slots
  // given to Init, which must not be nullptr). False (and nothing changes) when it is in.
  bool InsertAtSlot(uint32_t slot, RankId rank, absl::Span<const GroupChecksum> checksums) {
    uint8_t& state = state_[slot];
    if (state != kAbsent) return false;
    const std::string* only = slots_->OnlyGroupOf(slot);
    if (checksums.empty()) {
      state = kNoChecksum;
    } else if (checksums.size() == 1 && only != nullptr && checksums[0].group == *only) {
      state = kOneChecksum;
      checksum_[slot] = checksums[0].checksum;
    } else {
      state = kKeyed;
      keyed_.emplace(rank, SortedByGroup(checksums));
      return true;
    }
    ++in_slots_;
    return true;
  }
  bool PresentAtSlot(uint32_t slot) const { return state_[slot] != kAbsent; }
  // The slots given to Init (nullptr before the plan was complete).
  const ChunkSlots* slots() const { return slots_; }
  // The checksums `rank` reported, or nullopt when it has not.
  std::optional<GroupChecksums> Find(RankId rank) const {
    const std::optional<uint32_t> slot = Slot(rank);
    if (slot.has_value() && state_[*slot] != kKeyed) return AtSlot(*slot);
    auto it = keyed_.find(rank);
    return it == keyed_.end() ? std::nullopt : std::optional<GroupChecksums>(it->second);
  }
  bool contains(RankId rank) const {
    const std::optional<uint32_t> slot = Slot(rank);
    return slot.has_value() ? state_[*slot] != kAbsent : keyed_.contains(rank);
  }
  size_t size() const { return in_slots_ + keyed_.size(); }
  // fn(RankId, const GroupChecksums&) for each, in no particular order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (uint32_t s = 0; in_slots_ > 0 && s < state_.size(); ++s) {
      if (state_[s] == kNoChecksum || state_[s] == kOneChecksum) {
        fn(slots_->MemberAt(s), *AtSlot(s));
      }
    }
    for (const auto& [rank, checksums] : keyed_) fn(rank, checksums);
  }
  // fn(const std::string& group, uint64_t checksum) for each checksum of each rank in, in no
  // particular order, without copying any: what a check that every member agrees needs.
  template <typename Fn>
  void ForEachChecksum(Fn fn) const {
    for (uint32_t s = 0; in_slots_ > 0 && s < state_.size(); ++s) {
      if (state_[s] == kOneChecksum) fn(*slots_->OnlyGroupOf(s), checksum_[s]);
    }
    for (const auto& [rank, checksums] : keyed_) {
      for (const GroupChecksum& g : checksums) fn(g.group, g.checksum);
    }
  }

 private:
  enum : uint8_t { kAbsent, kNoChecksum, kOneChecksum, kKeyed };

  static GroupChecksums SortedByGroup(absl::Span<const GroupChecksum> checksums) {
    GroupChecksums sorted(checksums.begin(), checksums.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const GroupChecksum& a, const GroupChecksum& b) { return a.group < b.group; });
    return sorted;
  }

  std::optional<uint32_t> Slot(RankId rank) const {
    return slots_ == nullptr ? std::nullopt : slots_->MemberSlot(rank);
  }
  // Requires state_[slot] != kKeyed.
  std::optional<GroupChecksums> AtSlot(uint32_t slot) const {
    switch (state_[slot]) {
      case kNoChecksum:
        return GroupChecksums();
      case kOneChecksum:
        return GroupChecksums{{*slots_->OnlyGroupOf(slot), checksum_[slot]}};
      default:
        return std::nullopt;
    }
  }

  const ChunkSlots* slots_ = nullptr;
  std::vector<uint64_t> checksum_;
  std::vector<uint8_t> state_;
  size_t in_slots_ = 0;
  absl::flat_hash_map<RankId, GroupChecksums> keyed_;
};

}  // namespace psync::core

#endif  // PSYNC_SERVER_CORE_CHUNK_SETS_H_
