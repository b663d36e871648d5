#include "server/rpc/job_overview.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/rpc/convert.h"

namespace psync::server {
namespace {

// Cell letters and their rank, worst highest.
constexpr char kCellLetters[] = {'I', 'D', 'S', 'Y', 'M'};
enum Cell : uint8_t { kIdle = 0, kSynced = 1, kStaged = 2, kSyncing = 3, kMissing = 4 };

void Worsen(uint8_t* cell, Cell to) { *cell = std::max<uint8_t>(*cell, to); }

// Appends `ranks` (sorted) as runs of consecutive ranks, at most `max_runs`; true when cut.
template <typename Runs>
bool AddRuns(const std::vector<core::RankId>& ranks, size_t max_runs, Runs* out) {
  size_t runs = 0;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] <= ranks[j] + 1) ++j;
    if (runs == max_runs) return true;
    v1::RankRange* run = out->Add();
    run->set_first(ranks[i]);
    run->set_last(ranks[j]);
    ++runs;
    i = j + 1;
  }
  return false;
}

// Everything the answer is built from: every rank's cell of every chunk, and per node its sums.
struct Grid {
  uint32_t chunks = 0;
  std::vector<uint8_t> cells;  // rank * chunks + chunk
  std::vector<uint32_t> node_missing;
  std::vector<uint32_t> node_sync_pending;
  std::vector<uint32_t> node_lost;
  std::vector<double> node_score;
  std::vector<uint32_t> node_slowest_rank;

  uint8_t& cell(core::RankId rank, uint32_t chunk) { return cells[rank * chunks + chunk]; }
};

Grid BuildGrid(const JobStatusView& view) {
  const core::JobSnapshot& s = view.snapshot;
  const size_t nodes = view.nodes.num_nodes();
  Grid grid;
  grid.chunks = static_cast<uint32_t>(s.chunks.size());
  grid.cells.assign(static_cast<size_t>(s.world_size) * grid.chunks, kIdle);
  grid.node_missing.assign(nodes, 0);
  grid.node_sync_pending.assign(nodes, 0);
  grid.node_lost.assign(nodes, 0);
  grid.node_score.assign(nodes, 0);
  grid.node_slowest_rank.assign(nodes, 0);
  auto node_of = [&](core::RankId r) { return view.nodes.node_of_rank[r]; };
  for (uint32_t c = 0; c < grid.chunks; ++c) {
    const core::ChunkSnapshot& chunk = s.chunks[c];
    if (chunk.state == "WAITING") {
      // Every member not missing anything waits for the others.
      for (core::RankId r : chunk.members) {
        if (r < s.world_size) Worsen(&grid.cell(r, c), kStaged);
      }
      for (const core::ChunkSnapshot::MissingOfOptimizer& group : chunk.missing_by_optimizer) {
        for (core::RankId r : group.ranks) {
          if (r >= s.world_size) continue;
          Worsen(&grid.cell(r, c), kMissing);
          ++grid.node_missing[node_of(r)];
        }
      }
    } else if (chunk.state == "RELEASED") {
      for (core::RankId r : chunk.members) {
        if (r < s.world_size) Worsen(&grid.cell(r, c), kSynced);
      }
      for (core::RankId r : chunk.sync_pending) {
        if (r >= s.world_size) continue;
        Worsen(&grid.cell(r, c), kSyncing);
        ++grid.node_sync_pending[node_of(r)];
      }
    }
  }
  for (core::RankId r : view.lost_ranks) {
    if (r < s.world_size) ++grid.node_lost[node_of(r)];
  }
  for (const observe::StragglerScore& score : view.rank_scores) {
    if (score.rank >= s.world_size) continue;
    const uint32_t n = node_of(score.rank);
    if (score.score_seconds > grid.node_score[n]) {
      grid.node_score[n] = score.score_seconds;
      grid.node_slowest_rank[n] = score.rank;
    }
  }
  return grid;
}

void NodeToProto(const JobStatusView& view, const Grid& grid, uint32_t node,
                 const std::vector<std::vector<core::RankId>>& ranks_of_node,
                 v1::NodeOverview* out) {
  out->set_node(view.nodes.names[node]);
  const std::vector<core::RankId>& ranks = ranks_of_node[node];
  AddRuns(ranks, SIZE_MAX, out->mutable_ranks());
  out->set_num_ranks(static_cast<uint32_t>(ranks.size()));
  std::string letters(grid.chunks, 'I');
  int64_t waiting = 0;
  for (uint32_t c = 0; c < grid.chunks; ++c) {
    uint8_t worst = kIdle;
    for (core::RankId r : ranks) worst = std::max(worst, grid.cells[r * grid.chunks + c]);
    letters[c] = kCellLetters[worst];
    if (worst == kMissing || worst == kSyncing) {
      waiting = std::max(waiting, absl::ToInt64Microseconds(view.snapshot.chunks[c].waiting));
    }
  }
  out->set_chunk_states(std::move(letters));
  out->set_missing(grid.node_missing[node]);
  out->set_sync_pending(grid.node_sync_pending[node]);
  out->set_lost_ranks(grid.node_lost[node]);
  out->set_waiting_micros(waiting);
  out->set_straggler_score_seconds(grid.node_score[node]);
  out->set_slowest_rank(grid.node_slowest_rank[node]);
}

// The ranks missing `what` of a chunk, and the chunk.
struct Group {
  uint32_t chunk = 0;
  std::string what;
  std::vector<core::RankId> ranks;
};

std::vector<Group> MissingGroups(const core::JobSnapshot& s) {
  std::vector<Group> groups;
  for (uint32_t c = 0; c < s.chunks.size(); ++c) {
    const core::ChunkSnapshot& chunk = s.chunks[c];
    if (chunk.state == "WAITING") {
      for (const core::ChunkSnapshot::MissingOfOptimizer& group : chunk.missing_by_optimizer) {
        groups.push_back(Group{c, group.optimizer, group.ranks});
      }
    } else if (chunk.state == "RELEASED" && !chunk.sync_pending.empty()) {
      groups.push_back(Group{c, "sync_done", chunk.sync_pending});
    }
  }
  for (Group& g : groups) std::sort(g.ranks.begin(), g.ranks.end());
  // Longest waiting first, then by chunk, then by what.
  std::stable_sort(groups.begin(), groups.end(), [&](const Group& a, const Group& b) {
    return std::make_tuple(-s.chunks[a.chunk].waiting, a.chunk, a.what) <
           std::make_tuple(-s.chunks[b.chunk].waiting, b.chunk, b.what);
  });
  return groups;
}

void GroupToProto(const JobStatusView& view, const Group& group, v1::MissingGroup* out) {
  const core::ChunkSnapshot& chunk = view.snapshot.chunks[group.chunk];
  const absl::Duration deadline =
      group.chunk < view.deadlines.size() ? view.deadlines[group.chunk] : absl::ZeroDuration();
  out->set_chunk(group.chunk);
  out->set_step(chunk.step);
  out->set_what(wire::BoundEcho(group.what));
  out->set_num_ranks(static_cast<uint32_t>(group.ranks.size()));
  out->set_ranks_truncated(AddRuns(group.ranks, kMaxMissingGroupRuns, out->mutable_ranks()));
  std::vector<uint32_t> nodes;
  nodes.reserve(group.ranks.size());
  for (core::RankId r : group.ranks) {
    if (r < view.nodes.node_of_rank.size()) nodes.push_back(view.nodes.node_of_rank[r]);
  }
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  out->set_num_nodes(static_cast<uint32_t>(nodes.size()));
  for (size_t i = 0; i < nodes.size() && i < kMaxMissingGroupNodes; ++i) {
    out->add_nodes(view.nodes.names[nodes[i]]);
  }
  out->set_waiting_micros(absl::ToInt64Microseconds(chunk.waiting));
  out->set_deadline_micros(absl::ToInt64Microseconds(deadline));
  out->set_late(chunk.waiting > deadline);
}

void ExpandedToProto(const JobStatusView& view, const Grid& grid,
                     const std::vector<core::RankId>& ranks,
                     google::protobuf::RepeatedPtrField<v1::RankOverview>* out) {
  const core::JobSnapshot& s = view.snapshot;
  const size_t first = out->size();
  for (core::RankId r : ranks) {
    v1::RankOverview* rank = out->Add();
    rank->set_rank(r);
    rank->set_node(view.nodes.names[view.nodes.node_of_rank[r]]);
    std::string letters(grid.chunks, 'I');
    for (uint32_t c = 0; c < grid.chunks; ++c) {
      letters[c] = kCellLetters[grid.cells[r * grid.chunks + c]];
    }
    rank->set_chunk_states(std::move(letters));
    rank->set_lost(std::binary_search(view.lost_ranks.begin(), view.lost_ranks.end(), r));
  }
  // What each is missing, chunk by chunk: one pass over each chunk's lists.
  auto find = [&](core::RankId r) -> v1::RankOverview* {
    auto it = std::lower_bound(ranks.begin(), ranks.end(), r);
    if (it == ranks.end() || *it != r) return nullptr;
    return out->Mutable(static_cast<int>(first + (it - ranks.begin())));
  };
  for (uint32_t c = 0; c < s.chunks.size(); ++c) {
    const core::ChunkSnapshot& chunk = s.chunks[c];
    if (chunk.state == "WAITING") {
      // By optimizer name, as the contributors are ordered: a rank's entries in that order.
      for (const core::ChunkSnapshot::MissingOfOptimizer& group : chunk.missing_by_optimizer) {
        for (core::RankId r : group.ranks) {
          if (v1::RankOverview* rank = find(r); rank != nullptr) {
            rank->add_missing(absl::StrCat("c", c, ":", wire::BoundEcho(group.optimizer)));
          }
        }
      }
    } else if (chunk.state == "RELEASED") {
      for (core::RankId r : chunk.sync_pending) {
        if (v1::RankOverview* rank = find(r); rank != nullptr) {
          rank->add_missing(absl::StrCat("c", c, ":sync_done"));
        }
      }
    }
  }
}

}  // namespace

absl::StatusOr<OverviewRequest> OverviewRequestFromProto(const v1::GetJobOverviewRequest& request) {
  OverviewRequest out;
  out.node_offset = request.node_offset();
  if (request.node_limit() > kMaxOverviewNodes) {
    return absl::InvalidArgumentError(absl::StrCat("node_limit ", request.node_limit(),
                                                   " out of range [0, ", kMaxOverviewNodes, "]"));
  }
  if (request.node_limit() != 0) out.node_limit = request.node_limit();
  if (request.missing_limit() > kMaxOverviewMissingGroups) {
    return absl::InvalidArgumentError(absl::StrCat("missing_limit ", request.missing_limit(),
                                                   " out of range [0, ", kMaxOverviewMissingGroups,
                                                   "]"));
  }
  if (request.missing_limit() != 0) out.missing_limit = request.missing_limit();
  if (static_cast<size_t>(request.expand_nodes_size()) > kMaxOverviewExpandedNodes) {
    return absl::InvalidArgumentError(absl::StrCat("expand_nodes: ", request.expand_nodes_size(),
                                                   " names, at most ", kMaxOverviewExpandedNodes));
  }
  out.expand_nodes.assign(request.expand_nodes().begin(), request.expand_nodes().end());
  return out;
}

void JobOverviewToProto(const JobStatusView& view, const OverviewRequest& request,
                        v1::JobOverview* out) {
  JobStatusToProto(view, out->mutable_status(), /*list_limit=*/0);
  const Grid grid = BuildGrid(view);
  const uint32_t num_nodes = static_cast<uint32_t>(view.nodes.num_nodes());
  std::vector<std::vector<core::RankId>> ranks_of_node(num_nodes);
  for (core::RankId r = 0; r < view.nodes.node_of_rank.size(); ++r) {
    ranks_of_node[view.nodes.node_of_rank[r]].push_back(r);
  }
  out->set_num_nodes(num_nodes);
  out->set_node_offset(request.node_offset);
  uint32_t holding_back = 0;
  for (uint32_t n = 0; n < num_nodes; ++n) {
    holding_back += grid.node_missing[n] > 0 || grid.node_sync_pending[n] > 0;
  }
  out->set_nodes_holding_back(holding_back);
  const uint64_t end =
      std::min<uint64_t>(num_nodes, uint64_t{request.node_offset} + request.node_limit);
  for (uint64_t n = request.node_offset; n < end; ++n) {
    NodeToProto(view, grid, static_cast<uint32_t>(n), ranks_of_node, out->add_nodes());
  }

  const std::vector<Group> groups = MissingGroups(view.snapshot);
  out->set_missing_groups(static_cast<uint32_t>(groups.size()));
  for (size_t i = 0; i < groups.size() && i < request.missing_limit; ++i) {
    GroupToProto(view, groups[i], out->add_missing());
  }

  std::vector<uint32_t> scored;
  for (uint32_t n = 0; n < num_nodes; ++n) {
    if (grid.node_score[n] > 0) scored.push_back(n);
  }
  const size_t slowest = std::min(scored.size(), kSlowestNodes);
  std::partial_sort(scored.begin(), scored.begin() + slowest, scored.end(),
                    [&](uint32_t a, uint32_t b) {
                      if (grid.node_score[a] != grid.node_score[b]) {
                        return grid.node_score[a] > grid.node_score[b];
                      }
                      return a < b;
                    });
  for (size_t i = 0; i < slowest; ++i) {
    NodeToProto(view, grid, scored[i], ranks_of_node, out->add_slowest_nodes());
  }

  for (const std::string& name : request.expand_nodes) {
    const int64_t node = view.nodes.Find(name);
    if (node >= 0) ExpandedToProto(view, grid, ranks_of_node[node], out->mutable_expanded());
  }
}

}  // namespace psync::server
