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

// One contributor's check-in: its shard checksum (if sent) and when it arrived, in 24 bytes.
class StagedMark {
 public:
  StagedMark(std::optional<uint64_t> checksum, absl::Time at)
      : at_ns_(absl::ToUnixNanos(at)), checksum_(checksum.value_or(0)),
        has_checksum_(checksum.has_value()) {}
  std::optional<uint64_t> checksum() const {
    return has_checksum_ ? std::optional<uint64_t>(checksum_) : std::nullopt;
  }
  absl::Time at() const { return absl::FromUnixNanos(at_ns_); }

 private:
  int64_t at_ns_;
  uint64_t checksum_;
  bool has_checksum_;
};

// Who staged one (step, chunk), keyed by (rank, optimizer id) packed in 8 bytes: a chunk of
// 32,768 contributors costs a third of what Contributor keys (a name each) cost, and a lookup
// hashes one integer. `ids` must be set (JobTracker::ChunkStepFor) before Insert.
class StagedSet {
 public:
  void set_ids(OptimizerIds* ids) { ids_ = ids; }
  // False (and nothing changes) when `who` is already in.
  bool Insert(const Contributor& who, StagedMark mark) {
    return marks_.try_emplace(Key(who.rank, ids_->Intern(who.optimizer)), mark).second;
  }
  const StagedMark* Find(const Contributor& who) const {
    std::optional<uint32_t> id = ids_ == nullptr ? std::nullopt : ids_->Find(who.optimizer);
    if (!id.has_value()) return nullptr;
    auto it = marks_.find(Key(who.rank, *id));
    return it == marks_.end() ? nullptr : &it->second;
  }
  bool contains(const Contributor& who) const { return Find(who) != nullptr; }
  size_t size() const { return marks_.size(); }
  bool empty() const { return marks_.empty(); }
  void reserve(size_t n) { marks_.reserve(n); }
  // fn(const Contributor&, const StagedMark&) for each, in no particular order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const auto& [key, mark] : marks_) {
      fn(Contributor{static_cast<RankId>(key >> 32), ids_->Name(static_cast<uint32_t>(key))},
         mark);
    }
  }

 private:
  static uint64_t Key(RankId rank, uint32_t optimizer) {
    return (static_cast<uint64_t>(rank) << 32) | optimizer;
  }
  OptimizerIds* ids_ = nullptr;
  absl::flat_hash_map<uint64_t, StagedMark> marks_;
};

struct ChunkStep {
  StagedSet staged;
  absl::Time first_checkin = absl::InfinitePast();
  absl::Time last_checkin = absl::InfinitePast();
  bool released = false;
  uint64_t sequence = 0;
  absl::Time released_at = absl::InfinitePast();
  Contributor last;
  // rank -> reported checksums (one per sync group of the chunk, nearly always one: kept inline)
  absl::flat_hash_map<RankId, GroupChecksums> done;
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
