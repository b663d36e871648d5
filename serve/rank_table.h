// RankTable<V>: values keyed by rank, held in pages of 16 consecutive ranks (one hash-map entry a
// page). A node's ranks are consecutive and a relay's batch is runs of nodes' ranks, so looking up
// a batch's ranks one after another reads one page per run of 16 instead of one scattered hash slot
// per rank: with a flat hash map keyed by rank, those lookups were the coordinator's largest cost
// of checking that a relay's ranks are attached on its stream. Memory is a page per 16-rank run
// that holds any value, whatever the ranks' spread.
//
// Thread-compatible. V must be default-constructible; an absent rank's place holds V(). Pointers
// to values stay valid until the next insert or erase (as with absl::flat_hash_map).
#ifndef PSYNC_SERVE_RANK_TABLE_H_
#define PSYNC_SERVE_RANK_TABLE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace psync::serve {

template <typename V>
class RankTable {
 public:
  static constexpr uint32_t kPageRanks = 16;

  // The value of `rank`; nullptr when there is none.
  const V* Find(uint32_t rank) const {
    auto it = pages_.find(rank / kPageRanks);
    if (it == pages_.end()) return nullptr;
    const Page& page = it->second;
    const uint32_t at = rank % kPageRanks;
    return page.Has(at) ? &page.values[at] : nullptr;
  }
  V* Find(uint32_t rank) { return const_cast<V*>(static_cast<const RankTable&>(*this).Find(rank)); }
  // Starts loading where Find(rank) looks. A hint only.
  void Prefetch(uint32_t rank) const { pages_.prefetch(rank / kPageRanks); }
  // The value of `rank`, made (value-initialized) when there is none.
  V& operator[](uint32_t rank) {
    Page& page = pages_[rank / kPageRanks];
    const uint32_t at = rank % kPageRanks;
    if (!page.Has(at)) {
      page.present |= static_cast<uint16_t>(1u << at);
      page.values[at] = V();
      ++size_;
    }
    return page.values[at];
  }
  // Removes `rank` (its value reset to V(), so that what it owns goes now); false when absent.
  bool erase(uint32_t rank) {
    auto it = pages_.find(rank / kPageRanks);
    const uint32_t at = rank % kPageRanks;
    if (it == pages_.end() || !it->second.Has(at)) return false;
    it->second.values[at] = V();
    it->second.present &= static_cast<uint16_t>(~(1u << at));
    --size_;
    if (it->second.present == 0) pages_.erase(it);
    return true;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // fn(rank, const V&) for each, in no particular order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const auto& [index, page] : pages_) {
      for (uint32_t at = 0; at < kPageRanks; ++at) {
        if (page.Has(at)) fn(index * kPageRanks + at, page.values[at]);
      }
    }
  }

 private:
  struct Page {
    bool Has(uint32_t at) const { return (present >> at) & 1u; }
    uint16_t present = 0;  // bit i: rank (page index x 16 + i) has a value
    std::array<V, kPageRanks> values{};
  };
  static_assert(kPageRanks <= 16, "Page::present has a bit per rank");

  absl::flat_hash_map<uint32_t, Page> pages_;  // by rank / kPageRanks
  size_t size_ = 0;
};

}  // namespace psync::serve

#endif  // PSYNC_SERVE_RANK_TABLE_H_
