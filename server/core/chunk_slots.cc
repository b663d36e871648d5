#include "server/core/chunk_slots.h"

namespace psync::core {
namespace {

// A prefix array over the ranks' span costs 4 bytes per rank of the span; beyond this many per
// listed position, a hash map is smaller.
constexpr size_t kDenseSpanPerPosition = 4;

}  // namespace

RankRuns::RankRuns(absl::Span<const RankId> sorted_ranks) {
  if (sorted_ranks.empty()) return;
  first_ = sorted_ranks.front();
  const size_t span = static_cast<size_t>(sorted_ranks.back()) - first_ + 1;
  dense_ = span <= kDenseSpanPerPosition * sorted_ranks.size() + 64;
  if (dense_) {
    starts_.assign(span + 1, 0);
    for (RankId r : sorted_ranks) ++starts_[r - first_ + 1];
    for (size_t i = 1; i < starts_.size(); ++i) starts_[i] += starts_[i - 1];
    const uint32_t per_rank = starts_[1];
    for (size_t i = 1; i < starts_.size(); ++i) {
      if (starts_[i] != i * per_rank) return;
    }
    uniform_ = per_rank;
    span_ = static_cast<uint32_t>(span);
    starts_.clear();
    starts_.shrink_to_fit();
    return;
  }
  for (uint32_t i = 0; i < sorted_ranks.size(); ++i) {
    auto [it, added] = sparse_.try_emplace(sorted_ranks[i], i, i + 1);
    if (!added) it->second.second = i + 1;
  }
}

ChunkSlots::ChunkSlots(const absl::btree_set<Contributor>& contributors,
                       absl::Span<const RankId> members,
                       const std::map<std::string, std::vector<RankId>>& groups)
    : members_(members.begin(), members.end()),
      num_members_(members.size()),
      member_runs_(members) {
  constexpr uint32_t kNoGroup = kSeveralGroups - 1;
  member_group_.assign(members.size(), kNoGroup);
  group_names_.reserve(groups.size());
  for (const auto& [name, ranks] : groups) {
    const uint32_t g = static_cast<uint32_t>(group_names_.size());
    group_names_.push_back(name);
    for (RankId r : ranks) {
      const std::optional<uint32_t> slot = MemberSlot(r);
      if (!slot.has_value()) continue;  // members are the groups' union: not reached
      uint32_t& only = member_group_[*slot];
      only = only == kNoGroup ? g : kSeveralGroups;
    }
  }
  for (uint32_t& only : member_group_) {
    if (only == kNoGroup) only = kSeveralGroups;  // in no group: nothing to imply
  }
  contributor_rank_.reserve(contributors.size());
  contributor_optimizer_.reserve(contributors.size());
  absl::flat_hash_map<absl::string_view, uint32_t> index;  // views contributors' names
  for (const Contributor& c : contributors) {
    auto [it, added] = index.try_emplace(c.optimizer, static_cast<uint32_t>(optimizers_.size()));
    if (added) optimizers_.push_back(c.optimizer);
    contributor_rank_.push_back(c.rank);
    contributor_optimizer_.push_back(it->second);
  }
  contributor_runs_ = RankRuns(contributor_rank_);
  // Sorted by (rank, optimizer), the first rank's optimizers are indices 0..K-1 in name order, so
  // a rank contributing all of them holds them in that order.
  const size_t k = optimizers_.size();
  for (size_t s = 0; s < contributor_rank_.size(); ++s) {
    if (contributor_optimizer_[s] != s % k) return;
    if (s % k == 0 && contributor_runs_.Find(contributor_rank_[s]).second != s + k) return;
  }
  every_optimizer_in_order_ = true;
}

}  // namespace psync::core
