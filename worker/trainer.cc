#include "worker/trainer.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/status_macros.h"

namespace psync {
namespace worker {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::Status Annotate(const absl::Status& status, absl::string_view what) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

}  // namespace

absl::string_view SyncModeName(SyncMode mode) {
  switch (mode) {
    case SyncMode::kCoordinated:
      return "coordinated";
    case SyncMode::kNaive:
      return "naive";
    case SyncMode::kLocalDeferred:
      return "local-deferred";
  }
  return "?";
}

absl::StatusOr<SyncMode> ParseSyncMode(absl::string_view name) {
  for (SyncMode mode : {SyncMode::kCoordinated, SyncMode::kNaive, SyncMode::kLocalDeferred}) {
    if (name == SyncModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown sync mode '", name, "'; known: coordinated, naive, local-deferred"));
}

Trainer::Trainer(RankModel* model, ReferenceModel* reference, Coordination* coordination,
                 TrainerOptions options)
    : model_(model),
      reference_(reference),
      coordination_(coordination),
      options_(std::move(options)),
      last_synced_step_(model->config().num_chunks, -1) {}

absl::Status Trainer::Execute(int64_t step, int chunk,
                              const std::vector<std::array<bool, 2>>& staged,
                              std::vector<int>* executions, StepResult* result,
                              std::vector<psync::v1::GroupChecksum>* checksums,
                              double* check_seconds) {
  const ModelConfig& config = model_->config();
  PSYNC_RETURN_IF_ERROR(Annotate(model_->Sync(chunk), absl::StrCat("sync of chunk ", chunk)));
  const int execution = ++(*executions)[chunk];
  if (execution == 1) ++result->chunks_synced;
  ++result->executions;
  last_synced_step_[chunk] = step;

  SyncExecution record;
  record.chunk = chunk;
  record.execution = execution;
  record.dense_staged = staged[chunk][static_cast<int>(ParamKind::kDense)];
  record.expert_staged = staged[chunk][static_cast<int>(ParamKind::kExpert)];
  checksums->clear();
  if (options_.verify || options_.checksums) {
    for (ParamKind kind : kParamKinds) {
      absl::StatusOr<std::vector<float>> weights = model_->Weights(chunk, kind);
      if (!weights.ok()) return weights.status();
      // Padding elements are left out: they are zero everywhere.
      const absl::Span<const float> real =
          absl::MakeConstSpan(*weights).subspan(0, config.RealElements(kind));
      if (options_.checksums) {
        psync::v1::GroupChecksum checksum;
        checksum.set_group(config.GroupName(kind));
        checksum.set_checksum(WeightsChecksum(real));
        checksums->push_back(std::move(checksum));
      }
      if (options_.verify) {
        const auto start = Clock::now();
        record.diff[static_cast<int>(kind)] =
            CompareWeights(real, reference_->ExpectedWeights(chunk, kind).subspan(0, real.size()),
                           options_.tolerance);
        *check_seconds += SecondsSince(start);
      }
    }
  }
  result->syncs.push_back(std::move(record));
  return absl::OkStatus();
}

absl::Status Trainer::AwaitDirective(int64_t step, int chunk) {
  return Annotate(coordination_->WaitForDirective(step, chunk, options_.directive_timeout).status(),
                  absl::StrCat("waiting for the directive of step ", step, " chunk ", chunk));
}

absl::Status Trainer::ReportSyncDone(int64_t step, int chunk,
                                     std::vector<psync::v1::GroupChecksum> checksums,
                                     uint32_t executions) {
  return Annotate(coordination_->ReportSyncDone(step, chunk, std::move(checksums), executions),
                  absl::StrCat("SyncDone of step ", step, " chunk ", chunk));
}

absl::Status Trainer::ObserveSyncDone(int64_t step, int chunk,
                                      std::vector<psync::v1::GroupChecksum> checksums,
                                      uint32_t executions, StepResult* result) {
  absl::Status status =
      coordination_->ReportSyncDone(step, chunk, std::move(checksums), executions);
  if (status.code() == absl::StatusCode::kFailedPrecondition) {
    ++result->early_sync_answers;
    return absl::OkStatus();
  }
  return Annotate(status, absl::StrCat("SyncDone of step ", step, " chunk ", chunk));
}

absl::StatusOr<StepResult> Trainer::RunStep(int64_t step) {
  const ModelConfig& config = model_->config();
  const int chunks = config.num_chunks;
  StepResult result;
  result.step = step;
  if (options_.verify) {
    if (reference_ == nullptr) return absl::FailedPreconditionError("verify needs a reference");
    PSYNC_RETURN_IF_ERROR(reference_->Step(step));
  }
  const bool observe = options_.mode == SyncMode::kCoordinated || options_.report;

  // Backward and the gradient reduce-scatter.
  auto start = Clock::now();
  PSYNC_RETURN_IF_ERROR(model_->WriteGradients(step, options_.gradients));
  PSYNC_RETURN_IF_ERROR(Annotate(model_->ReduceScatterGradients(), "gradient reduce-scatter"));
  result.grad_seconds = SecondsSince(start);

  std::vector<std::array<bool, 2>> staged(chunks, {false, false});
  std::vector<int> executions(chunks, 0);
  std::vector<std::vector<psync::v1::GroupChecksum>> checksums(chunks);
  double check_seconds = 0;
  double sync_in_stage_seconds = 0;  // naive: syncs run inside the optimizer loop

  // The two DistOpts, dense first.
  start = Clock::now();
  for (ParamKind kind : kParamKinds) {
    for (int c = 0; c < chunks; ++c) {
      PSYNC_RETURN_IF_ERROR(Annotate(model_->Stage(c, kind, step),
                                     absl::StrCat(ParamKindName(kind), " stage of chunk ", c)));
      staged[c][static_cast<int>(kind)] = true;
      if (observe) {
        PSYNC_RETURN_IF_ERROR(Annotate(
            coordination_->ReportStaged(step, c, ParamKindName(kind)),
            absl::StrCat("Staged of step ", step, " chunk ", c, " ", ParamKindName(kind))));
      }
      if (options_.mode == SyncMode::kNaive) {
        const auto sync_start = Clock::now();
        PSYNC_RETURN_IF_ERROR(
            Execute(step, c, staged, &executions, &result, &checksums[c], &check_seconds));
        if (observe) {
          PSYNC_RETURN_IF_ERROR(ObserveSyncDone(step, c, checksums[c], executions[c], &result));
        }
        sync_in_stage_seconds += SecondsSince(sync_start);
      }
    }
  }
  result.stage_seconds = SecondsSince(start) - sync_in_stage_seconds;

  // The param syncs.
  start = Clock::now();
  switch (options_.mode) {
    case SyncMode::kCoordinated:
      for (int c = 0; c < chunks; ++c) {
        PSYNC_RETURN_IF_ERROR(AwaitDirective(step, c));
        if (last_synced_step_[c] >= static_cast<int64_t>(step)) {
          ++result.duplicate_directives;
          continue;
        }
        PSYNC_RETURN_IF_ERROR(
            Execute(step, c, staged, &executions, &result, &checksums[c], &check_seconds));
        PSYNC_RETURN_IF_ERROR(ReportSyncDone(step, c, checksums[c], executions[c]));
      }
      break;
    case SyncMode::kLocalDeferred:
      for (int c = 0; c < chunks; ++c) {
        PSYNC_RETURN_IF_ERROR(
            Execute(step, c, staged, &executions, &result, &checksums[c], &check_seconds));
        if (observe) {
          PSYNC_RETURN_IF_ERROR(ObserveSyncDone(step, c, checksums[c], executions[c], &result));
        }
      }
      break;
    case SyncMode::kNaive:
      break;  // synced inside the optimizer loop
  }
  // Observe-only modes: once the coordinator released the chunk, the final count. A repeat of
  // a SyncDone the coordinator already accepted is answered as a duplicate.
  if (options_.mode != SyncMode::kCoordinated && observe) {
    for (int c = 0; c < chunks; ++c) {
      PSYNC_RETURN_IF_ERROR(AwaitDirective(step, c));
      PSYNC_RETURN_IF_ERROR(ReportSyncDone(step, c, checksums[c], executions[c]));
    }
  }
  result.sync_seconds = SecondsSince(start) + sync_in_stage_seconds - check_seconds;

  // The weights at the end of the step.
  if (options_.verify) {
    result.verified = true;
    result.final_diff.resize(chunks);
    for (int c = 0; c < chunks; ++c) {
      for (ParamKind kind : kParamKinds) {
        absl::StatusOr<std::vector<float>> weights = model_->Weights(c, kind);
        if (!weights.ok()) return weights.status();
        WeightDiff& diff = result.final_diff[c][static_cast<int>(kind)];
        const size_t real = static_cast<size_t>(config.RealElements(kind));
        diff = CompareWeights(absl::MakeConstSpan(*weights).subspan(0, real),
                              reference_->ExpectedWeights(c, kind).subspan(0, real),
                              options_.tolerance);
        if (!diff.ok()) result.verified = false;
      }
    }
  }
  return result;
}

}  // namespace worker
}  // namespace psync
