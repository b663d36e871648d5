// What psync-worker prints: one line per step, the mismatch details, the run's verdict, the
// timing of --bench, and the coordinator's audit.
//
// Every function is pure (text from values) except FetchAudit, which makes two unary calls.
// Thread-safe.
#ifndef PSYNC_WORKER_REPORT_H_
#define PSYNC_WORKER_REPORT_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "worker/model_layout.h"
#include "worker/trainer.h"

namespace psync {
namespace worker {

// "rank 1 step 3: synced 4/4 chunks in 4 executions, 5.21 ms (grad 1.02, stage 0.80, sync 3.39),
// verify OK", then one line per wrong weights: at the end of the step ("rank 1 step 3 chunk 0
// dense weights WRONG: ...") and after an earlier execution of a chunk's sync that the step's
// last execution overwrote ("rank 1 step 3 chunk 0 expert weights WRONG after sync 1 of 2 (ran
// after the dense optimizer staged, before the expert optimizer staged): ...").
std::vector<std::string> StepLines(const ModelConfig& config, const TrainerOptions& options,
                                   const StepResult& result);

// Accumulates the steps of a run and renders the verdict.
class RunSummary {
 public:
  RunSummary(const ModelConfig& config, const TrainerOptions& options)
      : config_(config), options_(options) {}

  void Add(const StepResult& result);

  // Every step verified (when verifying), and at least one step ran.
  bool ok() const { return steps_ > 0 && failed_steps_ == 0; }
  int64_t steps() const { return steps_; }
  int64_t failed_steps() const { return failed_steps_; }

  // "rank 1 result: OK: ..." or "rank 1 result: FAIL: ..." followed by one line per chunk and
  // kind whose weights went wrong, and a line on the syncs' executions and early answers.
  std::vector<std::string> Lines() const;

 private:
  struct Wrong {
    int64_t steps = 0;
    double max_zeroed = 0;     // fraction
    double max_nonfinite = 0;  // fraction
    double max_mismatched = 0;
    double max_abs_error = 0;
    bool dense_staged = false;  // intermediate executions: what had staged
    bool expert_staged = false;
    int execution = 0;
    int of = 0;
  };
  // (chunk, kind, intermediate)
  using Key = std::tuple<int, int, bool>;

  const ModelConfig config_;
  const TrainerOptions options_;
  int64_t steps_ = 0;
  int64_t failed_steps_ = 0;
  int64_t executions_ = 0;
  int64_t chunk_syncs_ = 0;
  int64_t early_answers_ = 0;
  std::map<Key, Wrong> wrong_;
};

// Robust timing of a --bench run: medians over the timed steps.
struct BenchSummary {
  int64_t steps = 0;
  double step_median = 0, step_p10 = 0, step_p90 = 0;
  double grad_median = 0, stage_median = 0, sync_median = 0;
};
BenchSummary SummarizeBench(const std::vector<StepResult>& timed);
// "bench rank 0: mode coordinated ...": one line for the step times, one per kind for the
// all-gathers (bytes per call, time per call, algorithm and bus bandwidth).
std::vector<std::string> BenchLines(const ModelConfig& config, const TrainerOptions& options,
                                    absl::string_view compute, absl::string_view collective,
                                    const BenchSummary& bench, const GatherStats gather[2],
                                    int64_t warmup_steps);

// The coordinator's view of a job.
struct AuditSnapshot {
  psync::v1::JobStatus status;
  psync::v1::GetAuditResponse audit;
};
// GetJobStatus + GetAudit, each with a deadline of `timeout`.
absl::StatusOr<AuditSnapshot> FetchAudit(psync::v1::Coordinator::Stub* stub,
                                         const std::string& job_id, absl::Duration timeout);

// "released 16, complete 16, released twice 0, checksum mismatches 0, early syncs 0, repeated
// syncs 0"
std::string AuditTotalsText(const psync::v1::AuditTotals& totals);
// True when no (step, chunk) was released twice, no checksums disagreed, nothing was synced early
// or repeatedly, and every released (step, chunk) completed.
bool AuditClean(const psync::v1::AuditTotals& totals);
// The audit report: the totals, one line per chunk with violations (which steps), the counters,
// and a verdict line "coordinator audit: CLEAN" / "coordinator audit: VIOLATIONS (...)".
std::vector<std::string> AuditLines(const AuditSnapshot& snapshot);

// "0-3,5,7-9" for sorted distinct steps.
std::string StepRanges(const std::vector<uint64_t>& steps);

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_REPORT_H_
