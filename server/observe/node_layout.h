// NodeLayout: which node each rank of a job runs on, for the views that show a job by node
// (GetJobOverview, the dashboard, psyncctl, the per-node metrics). A rank's node is the name it
// sent when it joined (JoinRequest.node); ranks that sent none are grouped in blocks of
// `node_size` consecutive ranks, each block one node named "ranks A-B" (the block's ranks).
// Nodes are numbered in node order: by their lowest rank. Pure; thread-compatible.
#ifndef PSYNC_SERVER_OBSERVE_NODE_LAYOUT_H_
#define PSYNC_SERVER_OBSERVE_NODE_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "server/core/types.h"

namespace psync::observe {

// Ranks per unnamed block unless the coordinator is told otherwise (--node_size).
inline constexpr uint32_t kDefaultNodeSize = 8;

struct NodeLayout {
  std::vector<std::string> names;      // node index -> name, in node order
  std::vector<uint32_t> node_of_rank;  // rank -> node index, for every rank below the world size

  size_t num_nodes() const { return names.size(); }
  // The node index of `name`; -1 when no rank is on it.
  int64_t Find(absl::string_view name) const;
};

// Lays out ranks [0, world_size). `named(rank)` is the node the rank sent ("" for none), a view
// of a string that outlives the call.
// node_size 0 counts as 1.
NodeLayout LayOutNodes(uint32_t world_size, uint32_t node_size,
                       absl::FunctionRef<absl::string_view(core::RankId)> named);

}  // namespace psync::observe

#endif  // PSYNC_SERVER_OBSERVE_NODE_LAYOUT_H_
