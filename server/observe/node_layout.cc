#include "server/observe/node_layout.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace psync::observe {

int64_t NodeLayout::Find(absl::string_view name) const {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int64_t>(i);
  }
  return -1;
}

NodeLayout LayOutNodes(uint32_t world_size, uint32_t node_size,
                       absl::FunctionRef<absl::string_view(core::RankId)> named) {
  node_size = std::max<uint32_t>(node_size, 1);
  NodeLayout layout;
  layout.node_of_rank.resize(world_size);
  absl::flat_hash_map<std::string, uint32_t> by_name;
  absl::flat_hash_map<uint32_t, uint32_t> by_block;
  for (core::RankId rank = 0; rank < world_size; ++rank) {
    const absl::string_view name = named(rank);
    uint32_t index = 0;
    if (name.empty()) {
      const uint32_t block = rank / node_size;
      auto [it, added] = by_block.try_emplace(block, static_cast<uint32_t>(layout.names.size()));
      if (added) {
        const uint32_t first = block * node_size;
        const uint32_t last = std::min(first + node_size, world_size) - 1;
        layout.names.push_back(absl::StrCat("ranks ", first, "-", last));
      }
      index = it->second;
    } else {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        it = by_name.emplace(std::string(name), static_cast<uint32_t>(layout.names.size())).first;
        layout.names.emplace_back(name);
      }
      index = it->second;
    }
    layout.node_of_rank[rank] = index;
  }
  return layout;
}

}  // namespace psync::observe
