// DenseRankMap<T>: a map from RankId to T held in a table indexed by rank (a job's ranks run from
// 0 to its world size), with the subset of absl::flat_hash_map's interface the tracker uses: find,
// contains, operator[], size, clear, and iteration (in rank order). A node's or relay's batch names
// ranks next to each other, so their lookups walk memory in order instead of each hashing to a
// cache miss. Memory is that of a table up to the highest rank inserted.
//
// Thread-compatible. Iterators and references stay valid until an insert (operator[] of an absent
// rank) or clear.
#ifndef PSYNC_SERVER_CORE_DENSE_RANK_MAP_H_
#define PSYNC_SERVER_CORE_DENSE_RANK_MAP_H_

#include <cstddef>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "server/core/types.h"

namespace psync::core {

template <typename T>
class DenseRankMap {
 public:
  using value_type = std::pair<RankId, T>;

  template <bool kConst>
  class Iterator {
   public:
    using Slots = std::conditional_t<kConst, const std::vector<std::optional<value_type>>,
                                     std::vector<std::optional<value_type>>>;
    using reference = std::conditional_t<kConst, const value_type&, value_type&>;
    using pointer = std::conditional_t<kConst, const value_type*, value_type*>;

    Iterator(Slots* slots, size_t at) : slots_(slots), at_(at) { SkipAbsent(); }
    reference operator*() const { return *(*slots_)[at_]; }
    pointer operator->() const { return &*(*slots_)[at_]; }
    Iterator& operator++() {
      ++at_;
      SkipAbsent();
      return *this;
    }
    friend bool operator==(const Iterator& a, const Iterator& b) { return a.at_ == b.at_; }
    friend bool operator!=(const Iterator& a, const Iterator& b) { return a.at_ != b.at_; }

   private:
    void SkipAbsent() {
      while (at_ < slots_->size() && !(*slots_)[at_].has_value()) ++at_;
    }
    Slots* slots_;
    size_t at_;
  };
  using iterator = Iterator<false>;
  using const_iterator = Iterator<true>;

  iterator begin() { return iterator(&slots_, 0); }
  iterator end() { return iterator(&slots_, slots_.size()); }
  const_iterator begin() const { return const_iterator(&slots_, 0); }
  const_iterator end() const { return const_iterator(&slots_, slots_.size()); }

  iterator find(RankId rank) { return Present(rank) ? iterator(&slots_, rank) : end(); }
  const_iterator find(RankId rank) const {
    return Present(rank) ? const_iterator(&slots_, rank) : end();
  }
  bool contains(RankId rank) const { return Present(rank); }
  // The rank's value, inserted (value-initialized) when absent.
  T& operator[](RankId rank) {
    if (rank >= slots_.size()) slots_.resize(static_cast<size_t>(rank) + 1);
    std::optional<value_type>& slot = slots_[rank];
    if (!slot.has_value()) {
      slot.emplace(rank, T());
      ++size_;
    }
    return slot->second;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() {
    slots_.clear();
    slots_.shrink_to_fit();
    size_ = 0;
  }

 private:
  bool Present(RankId rank) const { return rank < slots_.size() && slots_[rank].has_value(); }

  std::vector<std::optional<value_type>> slots_;
  size_t size_ = 0;
};

}  // namespace psync::core

#endif  // PSYNC_SERVER_CORE_DENSE_RANK_MAP_H_
