// What the coordinator reports about one job: its tracker's snapshot, counters, liveness and
// observations, and for a job that left the coordinator, how and why (JobEnd). Plain values, built
// under the job's lock and handed out by copy; thread-compatible.
#ifndef PSYNC_SERVER_OWNER_JOB_VIEW_H_
#define PSYNC_SERVER_OWNER_JOB_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/core/job_tracker.h"
#include "server/core/types.h"
#include "server/observe/job_observer.h"
#include "server/observe/node_layout.h"

namespace psync::server {

struct JobCounters {
  uint64_t checkins = 0;
  uint64_t duplicate_checkins = 0;
  uint64_t releases = 0;
  uint64_t syncs_done = 0;
  uint64_t skipped_steps = 0;
  uint64_t violations = 0;
  uint64_t rejected = 0;
};

// How a job left the coordinator. kLive: it has not.
enum class JobEndKind {
  kLive,
  kEnded,    // EndJob, or every rank of its generation left finished
  kEvicted,  // no session and no message for the idle TTL
};

struct JobEnd {
  JobEndKind kind = JobEndKind::kLive;
  std::string reason;
  absl::Time time;
};

struct JobStatusView {
  core::JobSnapshot snapshot;
  JobCounters counters;
  uint32_t sessions_connected = 0;
  uint64_t stalls = 0;
  std::vector<observe::StragglerScore> stragglers;  // highest score first
  std::vector<absl::Duration> deadlines;            // per chunk
  observe::AuditTotals audit;
  std::vector<core::RankId> lost_ranks;  // sorted; non-empty makes a running job DEGRADED
  observe::NodeLayout nodes;             // which node each rank runs on
  // ViewDetail::kOverview only: every scored rank's straggler score, by rank.
  std::vector<observe::StragglerScore> rank_scores;
  // ViewDetail::kMissingByNode only: per node of `nodes`, how many contributors of the chunks
  // that wait (snapshot.chunks in state WAITING) it is missing.
  std::vector<uint32_t> missing_by_node;
  JobEnd end;
  // The job's lock, taken by its check-ins, SyncDones and node batches: how long they held it and
  // waited for it, and how many times it was taken (Coordinator::load_times has the totals).
  absl::Duration lock_held;
  absl::Duration lock_wait;
  uint64_t lock_acquisitions = 0;
};

// How much a job's view holds: kStatus every chunk's staged, missing and sync-pending lists;
// kOverview only who holds a chunk back, with its members (core::SnapshotLists::kHoldingBack: the
// missing by optimizer), and every rank's straggler score. kSummary (a job's line in ListJobs, the
// audit's totals) and kMissingByNode (a Prometheus scrape's gauges) hold no list, member or
// per-rank score, so that building them costs no copy per rank: kSummary no node layout and no
// stragglers either; kMissingByNode the node layout, each node's missing contributors
// (missing_by_node) and the top straggler only.
enum class ViewDetail { kStatus, kOverview, kSummary, kMissingByNode };

// The job's state as the API names it: FORMING, RUNNING, DEGRADED (running with a lost rank),
// ABORTED, or for a job that left the coordinator ENDED / EVICTED.
std::string JobStateText(const JobStatusView& view);

// True when `state` is one of the names JobStateText returns.
bool IsJobStateText(const std::string& state);

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_JOB_VIEW_H_
