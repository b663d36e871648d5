// Per-step bookkeeping of one job generation: who staged each chunk, whether and when it was
// released, who reported SyncDone with which checksums, and skip votes.
//
// Plain data owned by JobTracker; no behaviour. Thread-compatible.
#ifndef PSYNC_SERVER_CORE_STEP_STATE_H_
#define PSYNC_SERVER_CORE_STEP_STATE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/time/time.h"
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
      : at_ns_(absl::ToUnixNanos(at)), checksum_(checksum.value_or(0)),
        has_checksum_(checksum.has_value()), present_(true) {}
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

// Who staged one (step, chunk). Once the plan is complete (`slots` given) a mark per contributor
// slot in one array: 24 bytes a contributor, a check-in an index computation. Before (a chunk-step
// started while ranks were still joining), and for anyone the slots do not list, marks are keyed
// by (rank, optimizer id) packed in 8 bytes. `Init` must be called before Insert.
class StagedSet {
 public:
  void Init(OptimizerIds* ids, const ChunkSlots* slots) {
    ids_ = ids;
    slots_ = slots;
    if (slots_ != nullptr) by_slot_.resize(slots_->num_contributors());
  }
  // False (and nothing changes) when `who` is already in.
  bool Insert(const Contributor& who, StagedMark mark) {
    if (std::optional<uint32_t> slot = Slot(who); slot.has_value()) {
      if (by_slot_[*slot].present()) return false;
      by_slot_[*slot] = mark;
      ++in_slots_;
      return true;
    }
    return keyed_.try_emplace(Key(who.rank, ids_->Intern(who.optimizer)), mark).second;
  }
  const StagedMark* Find(const Contributor& who) const {
    if (std::optional<uint32_t> slot = Slot(who); slot.has_value()) {
      return by_slot_[*slot].present() ? &by_slot_[*slot] : nullptr;
    }
    std::optional<uint32_t> id = ids_ == nullptr ? std::nullopt : ids_->Find(who.optimizer);
    if (!id.has_value()) return nullptr;
    auto it = keyed_.find(Key(who.rank, *id));
    return it == keyed_.end() ? nullptr : &it->second;
  }
  bool contains(const Contributor& who) const { return Find(who) != nullptr; }
  size_t size() const { return in_slots_ + keyed_.size(); }
  bool empty() const { return size() == 0; }
  // fn(const Contributor&, const StagedMark&) for each, in no particular order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (uint32_t s = 0; in_slots_ > 0 && s < by_slot_.size(); ++s) {
      if (by_slot_[s].present()) fn(slots_->ContributorAt(s), by_slot_[s]);
    }
    for (const auto& [key, mark] : keyed_) {
      fn(Contributor{static_cast<RankId>(key >> 32), ids_->Name(static_cast<uint32_t>(key))},
         mark);
    }
  }

 private:
  static uint64_t Key(RankId rank, uint32_t optimizer) {
    return (static_cast<uint64_t>(rank) << 32) | optimizer;
  }
  std::optional<uint32_t> Slot(const Contributor& who) const {
    return slots_ == nullptr ? std::nullopt : slots_->ContributorSlot(who.rank, who.optimizer);
  }

  OptimizerIds* ids_ = nullptr;
  const ChunkSlots* slots_ = nullptr;
  std::vector<StagedMark> by_slot_;
  size_t in_slots_ = 0;
  absl::flat_hash_map<uint64_t, StagedMark> keyed_;
};

// Who reported SyncDone for one (step, chunk), with their checksums: per member slot once the plan
// is complete (`slots` given), keyed by rank before and for ranks the slots do not list.
class DoneSet {
 public:
  void Init(const ChunkSlots* slots) {
    slots_ = slots;
    if (slots_ != nullptr) {
      by_slot_.resize(slots_->num_members());
      present_.resize(slots_->num_members());
    }
  }
  // False (and nothing changes) when `rank` is already in.
  bool Insert(RankId rank, GroupChecksums checksums) {
    if (std::optional<uint32_t> slot = Slot(rank); slot.has_value()) {
      if (present_[*slot]) return false;
      present_[*slot] = true;
      by_slot_[*slot] = std::move(checksums);
      ++in_slots_;
      return true;
    }
    return keyed_.try_emplace(rank, std::move(checksums)).second;
  }
  // The checksums `rank` reported, or nullptr when it has not.
  const GroupChecksums* Find(RankId rank) const {
    if (std::optional<uint32_t> slot = Slot(rank); slot.has_value()) {
      return present_[*slot] ? &by_slot_[*slot] : nullptr;
    }
    auto it = keyed_.find(rank);
    return it == keyed_.end() ? nullptr : &it->second;
  }
  bool contains(RankId rank) const { return Find(rank) != nullptr; }
  size_t size() const { return in_slots_ + keyed_.size(); }
  // fn(RankId, const GroupChecksums&) for each, in no particular order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (uint32_t s = 0; in_slots_ > 0 && s < by_slot_.size(); ++s) {
      if (present_[s]) fn(slots_->MemberAt(s), by_slot_[s]);
    }
    for (const auto& [rank, checksums] : keyed_) fn(rank, checksums);
  }

 private:
  std::optional<uint32_t> Slot(RankId rank) const {
    return slots_ == nullptr ? std::nullopt : slots_->MemberSlot(rank);
  }

  const ChunkSlots* slots_ = nullptr;
  std::vector<GroupChecksums> by_slot_;
  std::vector<bool> present_;
  size_t in_slots_ = 0;
  absl::flat_hash_map<RankId, GroupChecksums> keyed_;
};

struct ChunkStep {
  StagedSet staged;
  absl::Time first_checkin = absl::InfinitePast();
  absl::Time last_checkin = absl::InfinitePast();
  bool released = false;
  uint64_t sequence = 0;
  absl::Time released_at = absl::InfinitePast();
  Contributor last;
  DoneSet done;  // who reported SyncDone, with their checksums
  // A rank re-announced (after a coordinator restart) that it executed this sync: the chunk was
  // released before, whatever the new coordinator has seen.
  bool synced_before = false;
};

struct StepState {
  std::map<ChunkId, ChunkStep> chunks;
  absl::flat_hash_set<RankId> skip_votes;
  std::string skip_reason;  // the first vote's reason
  bool skipped = false;
};

}  // namespace psync::core

#endif  // PSYNC_SERVER_CORE_STEP_STATE_H_
