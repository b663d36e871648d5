// FirstRepeat: the first item of a batch (StagedBatch, SyncDoneBatch) whose key an earlier item
// of the same batch has. Batches of a few items (what node agents send) compare pairwise without
// allocating; larger ones use a hash set. Pure; thread-safe; owns nothing. Internal to the
// job_tracker library.
#ifndef PSYNC_SERVER_CORE_FIRST_REPEAT_H_
#define PSYNC_SERVER_CORE_FIRST_REPEAT_H_

#include <cstddef>

#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"

namespace psync::core::internal {

// The index of the first item whose key(item) an earlier item has, or -1.
template <typename Item, typename KeyFn>
ptrdiff_t FirstRepeat(absl::Span<const Item> items, KeyFn key) {
  constexpr size_t kPairwise = 16;
  if (items.size() <= kPairwise) {
    for (size_t i = 1; i < items.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (key(items[i]) == key(items[j])) return static_cast<ptrdiff_t>(i);
      }
    }
    return -1;
  }
  absl::flat_hash_set<decltype(key(items[0]))> seen;
  seen.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (!seen.insert(key(items[i])).second) return static_cast<ptrdiff_t>(i);
  }
  return -1;
}

}  // namespace psync::core::internal

#endif  // PSYNC_SERVER_CORE_FIRST_REPEAT_H_
