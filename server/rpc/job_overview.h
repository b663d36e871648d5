// The job at a glance (GetJobOverview, /api/overview): a job's view (ViewDetail::kOverview)
// summarised by node, with what is missing grouped by (chunk, step, optimizer or SyncDone), in an
// answer whose size the request bounds, not the job. Pure; thread-compatible.
//
// A rank's cell of a chunk (at the chunk's current step) is, worst first: 'M' missing (one of its
// optimizers has not staged a WAITING chunk), 'Y' syncing (a RELEASED chunk it has not reported
// SyncDone for), 'S' staged (a WAITING chunk it is a member of and misses nothing of), 'D' synced
// (a RELEASED chunk it reported SyncDone for), 'I' idle (an IDLE chunk, or one it has no part
// in). A node's cell is the worst of its ranks'. The view's chunks carry the lists of
// core::SnapshotLists::kHoldingBack (ViewDetail::kOverview).
#ifndef PSYNC_SERVER_RPC_JOB_OVERVIEW_H_
#define PSYNC_SERVER_RPC_JOB_OVERVIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "server/owner/job_view.h"

namespace psync::server {

inline constexpr uint32_t kMaxOverviewNodes = 4096;          // node_limit, and its default
inline constexpr uint32_t kMaxOverviewMissingGroups = 1024;  // missing_limit
inline constexpr uint32_t kDefaultOverviewMissingGroups = 32;
inline constexpr size_t kMaxOverviewExpandedNodes = 16;  // expand_nodes
inline constexpr size_t kMaxMissingGroupRuns = 64;       // MissingGroup.ranks
inline constexpr size_t kMaxMissingGroupNodes = 16;      // MissingGroup.nodes
inline constexpr size_t kSlowestNodes = 10;              // JobOverview.slowest_nodes

struct OverviewRequest {
  uint32_t node_offset = 0;
  uint32_t node_limit = kMaxOverviewNodes;
  uint32_t missing_limit = kDefaultOverviewMissingGroups;
  std::vector<std::string> expand_nodes;
};

// The request's limits with their defaults; INVALID_ARGUMENT naming the field for one out of
// range (node_limit above 4096, missing_limit above 1024, more than 16 expand_nodes).
absl::StatusOr<OverviewRequest> OverviewRequestFromProto(const v1::GetJobOverviewRequest& request);

void JobOverviewToProto(const JobStatusView& view, const OverviewRequest& request,
                        v1::JobOverview* out);

}  // namespace psync::server

#endif  // PSYNC_SERVER_RPC_JOB_OVERVIEW_H_
