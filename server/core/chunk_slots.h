// ChunkSlots: the positions of a chunk's contributors and members once a job's plan is complete,
// so that per-step state can live in arrays indexed by position instead of hash maps keyed by
// (rank, optimizer) and rank: a chunk-step of 32,768 contributors then costs one array of marks,
// and a check-in is an index computation instead of a hash-map insert.
//
// RankRuns maps a rank to the run of positions it holds in a sorted list of ranks: computed when
// every rank of the list's span holds the same number of positions (the usual layouts: every rank,
// a pipeline stage, an expert group), else a prefix array over the span when the list covers it
// densely, a hash map otherwise.
//
// Immutable once built; thread-compatible. Owned by the JobPlan's ChunkInfo.
#ifndef PSYNC_SERVER_CORE_CHUNK_SLOTS_H_
#define PSYNC_SERVER_CORE_CHUNK_SLOTS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/core/types.h"

namespace psync::core {

class RankRuns {
 public:
  // `sorted_ranks` ascending; a rank may repeat (one position per repeat).
  explicit RankRuns(absl::Span<const RankId> sorted_ranks = {});

  // [begin, end) of `rank`'s positions; begin == end when it holds none.
  std::pair<uint32_t, uint32_t> Find(RankId rank) const {
    if (uniform_ != 0) {  // computed: no table read, whatever order ranks are looked up in
      if (rank < first_ || rank - first_ >= span_) return {0, 0};
      const uint32_t begin = (rank - first_) * uniform_;
      return {begin, begin + uniform_};
    }
    if (dense_) {
      if (rank < first_ || rank - first_ + 1 >= starts_.size()) return {0, 0};
      return {starts_[rank - first_], starts_[rank - first_ + 1]};
    }
    auto it = sparse_.find(rank);
    return it == sparse_.end() ? std::pair<uint32_t, uint32_t>{0, 0} : it->second;
  }
  // How many positions each rank holds when computed (every rank of the span holds as many), and
  // `count` consecutive ranks from `first` are all in the span; 0 otherwise.
  uint32_t UniformOver(RankId first, uint32_t count) const {
    if (uniform_ == 0 || first < first_) return 0;
    return uint64_t{first - first_} + count <= span_ ? uniform_ : 0;
  }

 private:
  bool dense_ = true;
  RankId first_ = 0;
  // Every rank of the span [first_, first_ + span_) holds uniform_ positions (0: not so); then
  // starts_ is not kept.
  uint32_t uniform_ = 0;
  uint32_t span_ = 0;
  std::vector<uint32_t> starts_;  // dense: the run of first_ + i is [starts_[i], starts_[i + 1])
  absl::flat_hash_map<RankId, std::pair<uint32_t, uint32_t>> sparse_;
};

class ChunkSlots {
 public:
  ChunkSlots() = default;
  // `groups`: the chunk's sync groups (name -> ranks), whose union is `members`.
  ChunkSlots(const absl::btree_set<Contributor>& contributors, absl::Span<const RankId> members,
             const std::map<std::string, std::vector<RankId>>& groups);

  size_t num_contributors() const { return contributor_rank_.size(); }
  size_t num_members() const { return num_members_; }

  // The slot of `who`, or nullopt when it is not a contributor of the chunk.
  std::optional<uint32_t> ContributorSlot(RankId rank, absl::string_view optimizer) const {
    const std::optional<uint32_t> index = OptimizerIndex(optimizer);
    if (!index.has_value()) return std::nullopt;
    return ContributorSlotAt(rank, *index);
  }
  // The index of `optimizer` among the chunk's optimizers, or nullopt when no contributor has it:
  // looked up once for many ranks' check-ins of one item (ContributorSlotAt).
  std::optional<uint32_t> OptimizerIndex(absl::string_view optimizer) const {
    for (uint32_t i = 0; i < optimizers_.size(); ++i) {
      if (optimizers_[i] == optimizer) return i;
    }
    return std::nullopt;
  }
  // ContributorSlot of the optimizer with that index. In the usual layout, every rank of a span
  // contributing every optimizer of the chunk, the slot is computed without reading any table, so
  // that check-ins arriving in any order do not each miss the cache on the way to their slot.
  std::optional<uint32_t> ContributorSlotAt(RankId rank, uint32_t optimizer_index) const {
    const auto [begin, end] = contributor_runs_.Find(rank);
    if (every_optimizer_in_order_) {
      if (begin == end || optimizer_index >= optimizers_.size()) return std::nullopt;
      return begin + optimizer_index;
    }
    for (uint32_t s = begin; s < end; ++s) {
      if (contributor_optimizer_[s] == optimizer_index) return s;
    }
    return std::nullopt;
  }
  // The slots of `count` consecutive ranks from `first` for the optimizer with that index, when
  // they are computed (the usual layout, ContributorSlotAt): the first rank's slot and the distance
  // from one rank's slot to the next's. Nullopt otherwise, or when a rank of the run is not a
  // contributor; ContributorSlotAt then answers rank by rank.
  struct SlotRun {
    uint32_t first = 0;
    uint32_t stride = 0;
  };
  std::optional<SlotRun> ContributorSlotsOfRun(RankId first, uint32_t count,
                                               uint32_t optimizer_index) const {
    if (!every_optimizer_in_order_ || optimizer_index >= optimizers_.size()) return std::nullopt;
    const uint32_t stride = contributor_runs_.UniformOver(first, count);
    if (stride == 0) return std::nullopt;
    return SlotRun{contributor_runs_.Find(first).first + optimizer_index, stride};
  }
  Contributor ContributorAt(uint32_t slot) const {
    return Contributor{contributor_rank_[slot], optimizers_[contributor_optimizer_[slot]]};
  }
  RankId ContributorRankAt(uint32_t slot) const { return contributor_rank_[slot]; }
  // The chunk's optimizers, by index (OptimizerIndex), and the index of a slot's.
  size_t num_optimizers() const { return optimizers_.size(); }
  const std::string& OptimizerAt(uint32_t index) const { return optimizers_[index]; }
  uint32_t ContributorOptimizerIndexAt(uint32_t slot) const { return contributor_optimizer_[slot]; }

  // The slot of member `rank`, or nullopt when it is not a member of the chunk's sync groups.
  std::optional<uint32_t> MemberSlot(RankId rank) const {
    const auto [begin, end] = member_runs_.Find(rank);
    return begin == end ? std::nullopt : std::optional<uint32_t>(begin);
  }
  RankId MemberAt(uint32_t slot) const { return members_[slot]; }
  // The name of the one sync group of the chunk that lists the member in `slot`, or nullptr when
  // several do (a member of one group reports one checksum, whose group the slot then implies).
  const std::string* OnlyGroupOf(uint32_t slot) const {
    const uint32_t g = member_group_[slot];
    return g == kSeveralGroups ? nullptr : &group_names_[g];
  }

 private:
  std::vector<std::string> optimizers_;          // the chunk's optimizer names
  std::vector<RankId> contributor_rank_;         // per slot, in contributor order
  std::vector<uint32_t> contributor_optimizer_;  // per slot: index into optimizers_
  RankRuns contributor_runs_;
  // Every contributing rank holds every optimizer, in index order: a slot is its rank's first
  // (computed by contributor_runs_ when the ranks form a span) + the optimizer's index.
  bool every_optimizer_in_order_ = false;
  static constexpr uint32_t kSeveralGroups = ~uint32_t{0};

  std::vector<RankId> members_;
  size_t num_members_ = 0;
  RankRuns member_runs_;
  std::vector<std::string> group_names_;
  std::vector<uint32_t> member_group_;  // per member slot: into group_names_, or kSeveralGroups
};

}  // namespace psync::core

#endif  // PSYNC_SERVER_CORE_CHUNK_SLOTS_H_
