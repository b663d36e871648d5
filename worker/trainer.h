// Trainer: one rank's training loop over the synthetic MoE model, in one of three param-sync
// modes, with the coordinator in the loop and the CPU reference checking every sync.
//
// A step (RunStep): backward writes the gradients into the shared buffers and reduce-scatters
// them; then the dense DistOpt stages every chunk, then the expert DistOpt; then the param syncs.
// How the syncs are ordered is the mode:
//   kCoordinated    each optimizer reports Staged per chunk; a chunk's sync runs when its
//                   SyncDirective arrives, at most once per step (the last synced step of each
//                   chunk is remembered), then SyncDone with one checksum per sync group.
//   kNaive          Megatron before #4800: right after the dense DistOpt stages a chunk, the chunk
//                   is synced (its expert buffer is gathered before the expert DistOpt staged
//                   it), and right after the expert DistOpt stages it, it is synced again (its
//                   dense buffer was zeroed by the first sync): two executions per chunk.
//   kLocalDeferred  Megatron after #4800: stage everything, then sync each chunk once, without
//                   waiting for the coordinator.
// In kNaive and kLocalDeferred the coordinator only observes (unless options.report is false):
// each local sync is reported as it happens with the executions so far (a report before the
// release is answered FAILED_PRECONDITION and audited as an early sync; the trainer counts it and
// goes on), and once the chunk's directive arrives SyncDone is reported again with the final
// count (above 1: audited as a repeated sync).
//
// Verification (options.verify): the ReferenceModel runs the same step; after every sync
// execution and at the end of the step, each chunk's dense and expert weights are compared with
// the reference within options.tolerance (worker/README.md says why 0 is right).
//
// Checksums: "dp" -> WeightsChecksum of the chunk's dense weights, "edp<k>" -> of its expert
// weights, after the sync.
//
// Errors: a failed collective, backend call or coordinator call (other than the observe-only
// answers above) ends the step with that status; the model is then unusable.
// Thread-compatible. Borrows the model, the reference (may be null when !verify) and the
// coordination.
#ifndef PSYNC_WORKER_TRAINER_H_
#define PSYNC_WORKER_TRAINER_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "worker/coordination.h"
#include "worker/rank_model.h"
#include "worker/reference_model.h"
#include "worker/weights_check.h"

namespace psync {
namespace worker {

enum class SyncMode { kCoordinated, kNaive, kLocalDeferred };

// "coordinated" / "naive" / "local-deferred".
absl::string_view SyncModeName(SyncMode mode);
// Inverse of SyncModeName; INVALID_ARGUMENT listing the names otherwise.
absl::StatusOr<SyncMode> ParseSyncMode(absl::string_view name);

struct TrainerOptions {
  SyncMode mode = SyncMode::kCoordinated;
  GradientSource gradients = GradientSource::kExactHost;
  bool verify = true;
  float tolerance = 0.0f;
  // kNaive / kLocalDeferred: send the observe-only check-ins and SyncDones.
  bool report = true;
  // SyncDone carries per-group checksums (needs a host copy of the weights after each sync).
  bool checksums = true;
  absl::Duration directive_timeout = absl::Seconds(60);
};

// One execution of a chunk's param sync.
struct SyncExecution {
  int chunk = 0;
  int execution = 0;  // 1 for the first execution of the chunk in the step
  // Which DistOpts had staged the chunk when it ran.
  bool dense_staged = false;
  bool expert_staged = false;
  // The weights right after it, against the reference (when verifying); by ParamKind.
  std::array<WeightDiff, 2> diff;
};

struct StepResult {
  int64_t step = 0;
  int chunks_synced = 0;  // distinct chunks synced in the step
  int executions = 0;     // sync executions in the step (one per chunk when correct)
  // Wall times of the phases; verification and the reference are not included.
  double grad_seconds = 0;   // write gradients + reduce-scatter
  double stage_seconds = 0;  // both DistOpts (AdamW + stage) and the Staged reports
  double sync_seconds = 0;   // directive waits, all-gathers, dequantize, zero, SyncDone reports
  double total_seconds() const { return grad_seconds + stage_seconds + sync_seconds; }
  // Coordinator answers the trainer accepted in observe-only modes.
  int early_sync_answers = 0;    // FAILED_PRECONDITION: synced before the release
  int duplicate_directives = 0;  // directives of a (step, chunk) already synced (ignored)
  bool verified = false;         // every chunk's weights matched at the end (when verifying)
  std::vector<SyncExecution> syncs;
  // The weights at the end of the step, per chunk and ParamKind (when verifying).
  std::vector<std::array<WeightDiff, 2>> final_diff;
};

class Trainer {
 public:
  Trainer(RankModel* model, ReferenceModel* reference, Coordination* coordination,
          TrainerOptions options);

  // Runs `step` (0, 1, 2, ... in order).
  absl::StatusOr<StepResult> RunStep(int64_t step);
  // Waits until the coordination has delivered every report (Coordination::Flush); its status.
  absl::Status Finish() { return coordination_->Flush(); }

  const TrainerOptions& options() const { return options_; }

 private:
  // Syncs `chunk` once more and records the execution (and its check) in `result`; fills the
  // SyncDone checksums of the weights it gathered.
  absl::Status Execute(int64_t step, int chunk, const std::vector<std::array<bool, 2>>& staged,
                       std::vector<int>* executions, StepResult* result,
                       std::vector<psync::v1::GroupChecksum>* checksums, double* check_seconds);
  // The directive of (step, chunk); an error names what was awaited.
  absl::Status AwaitDirective(int64_t step, int chunk);
  // Reports the SyncDone of (step, chunk); an error names the report.
  absl::Status ReportSyncDone(int64_t step, int chunk,
                              std::vector<psync::v1::GroupChecksum> checksums, uint32_t executions);
  // An observe-only SyncDone: OK and FAILED_PRECONDITION (counted) are accepted.
  absl::Status ObserveSyncDone(int64_t step, int chunk,
                               std::vector<psync::v1::GroupChecksum> checksums, uint32_t executions,
                               StepResult* result);

  // Constant after construction.
  RankModel* const model_;
  ReferenceModel* const reference_;
  Coordination* const coordination_;
  const TrainerOptions options_;

  std::vector<int64_t> last_synced_step_;  // by chunk; -1 before the first sync
};

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_TRAINER_H_
