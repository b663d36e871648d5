// psyncctl: the command-line tool that asks a psync coordinator who is missing, who is slow and
// whether every sync happened exactly once. The binary (psyncctl_main.cc) is a thin wrapper around
// RunPsyncctl, which tests call in-process.
//
//   psyncctl [--target HOST:PORT] [--json] [--timeout SECONDS] COMMAND [ARGS]
//
// With coordinator replicas, a command about one job (end-job, status, missing, stragglers, audit,
// trace) sent to a replica that does not own the job follows its OwnerRedirect to the owner (at
// most twice), with one line on stderr naming the owner.
//
//   jobs [--state S,S]                every job the coordinator holds (live, then the history of
//                                     ended and evicted jobs), optionally only those states
//   replicas                          coordinator replicas, each job's owner and epoch
//                                     (ListReplicas)
//   end-job JOB [--reason T] [--token T]  ends the job (EndJob)
//   status JOB [--ranks]              job state, nodes, per-chunk readiness (what each chunk waits
//                                     for, grouped), counters, audit totals, the slowest nodes
//                                     (GetJobOverview); --ranks: per rank (GetJobStatus)
//   missing JOB [--ranks] [--step S --chunk C]
//                                     who holds a chunk back, grouped by (chunk, step, what) with
//                                     its ranks and nodes, how long the chunk has waited and its
//                                     stall deadline; --ranks or --step: one row per rank
//   stragglers JOB [--top K]          the slowest ranks by rolling lateness
//   audit JOB [--last N]              the sync audit of recent (step, chunk)s and its totals
//   watch [JOB] [--kinds a,b] [--count N] [--replay]
//                                     one line per event, live, until interrupted or N events
//   trace JOB --steps A:B -o FILE     Chrome trace JSON of steps A..B (FILE "-" is stdout)
//   health [SERVICE]                  the gRPC health status of SERVICE ("" by default: the server)
//
// Exit codes:
//   0  the command ran and found nothing wrong;
//   1  the command ran and the answer is bad:
//        status      the job is ABORTED or DEGRADED (a rank lost), its violation counter is not 0,
//                    or a chunk waits past its stall deadline (missing contributors, or ranks
//                    without SyncDone);
//        missing     a listed contributor (or sync-pending rank) has waited past the deadline;
//        audit       a record was released more than once, or the totals count a double release,
//                    a checksum mismatch, an early sync or a repeated sync;
//        watch       a violation, stall, rank_lost or abort event was printed;
//        health      the status is not SERVING;
//      jobs, replicas, end-job, stragglers and trace never exit 1;
//   2  usage error (unknown command or flag, missing or malformed argument), RPC failure (the
//      gRPC status code and message are printed to stderr), or a file that cannot be written.
//
// Output: aligned tables with a header row, rows in a stable sorted order; with --json the answer
// as proto3 JSON (field names as in coordinator.proto; 64-bit integers are strings): the message
// itself for jobs (ListJobsResponse), replicas (ListReplicasResponse), end-job (EndJobResponse),
// status (JobStatus) and audit (GetAuditResponse);
// {"groups": [MissingGroup, ...]} for missing ({"chunks": [ChunkStatus, ...]}, the chunks
// considered, with --ranks or --step); {"stragglers":
// [StragglerScore, ...]} for stragglers; one Event object per line for watch;
// {"path": FILE, "bytes": N} for trace; HealthCheckResponse for health.
//
// Thread-safety: RunPsyncctl may run concurrently with itself (it shares no state); an Interrupt
// may be fired from any thread.
#ifndef PSYNC_CLIENT_PSYNCCTL_H_
#define PSYNC_CLIENT_PSYNCCTL_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace psync::ctl {

// Lets a long-running command (watch) be stopped from another thread, e.g. a signal thread.
// Fire() runs the current handler (if any) and makes every later SetHandler run its handler at
// once. Handlers run under the object's lock: they must be short and must not call back into it;
// once SetHandler(nullptr) has returned, the previous handler is not running and never runs again.
class Interrupt {
 public:
  void SetHandler(std::function<void()> handler) ABSL_LOCKS_EXCLUDED(mu_);
  void Fire() ABSL_LOCKS_EXCLUDED(mu_);
  bool fired() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> handler_ ABSL_GUARDED_BY(mu_);
};

// Runs psyncctl with `args` (without the program name); writes the answer to `out` and errors to
// `err`; returns the exit code (0, 1 or 2, see above). `interrupt` may be null.
int RunPsyncctl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                Interrupt* interrupt = nullptr);

// The --help text.
std::string PsyncctlUsage();

}  // namespace psync::ctl

#endif  // PSYNC_CLIENT_PSYNCCTL_H_
