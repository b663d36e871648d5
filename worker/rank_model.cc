#include "worker/rank_model.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/reference_model.h"
#include "worker/status_macros.h"
#include "worker/synthetic_model.h"

namespace psync {
namespace worker {
namespace {

absl::Status CheckGroup(const ModelConfig& config, ParamKind kind, const Collective* group) {
  if (group == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", config.GroupName(kind), " group must not be null"));
  }
  if (group->size() != config.GroupSize(kind) || group->rank() != config.GroupRank(kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", config.GroupName(kind), " group has rank ", group->rank(), " of ", group->size(),
        "; the model needs rank ", config.GroupRank(kind), " of ", config.GroupSize(kind)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RankModel>> RankModel::Create(const ModelConfig& config,
                                                             uint64_t seed, const AdamParams& adam,
                                                             ComputeBackend* backend,
                                                             Collective* dense_group,
                                                             Collective* expert_group) {
  PSYNC_RETURN_IF_ERROR(config.Validate());
  if (backend == nullptr) return absl::InvalidArgumentError("the backend must not be null");
  PSYNC_RETURN_IF_ERROR(CheckGroup(config, ParamKind::kDense, dense_group));
  PSYNC_RETURN_IF_ERROR(CheckGroup(config, ParamKind::kExpert, expert_group));
  std::unique_ptr<RankModel> model(
      new RankModel(config, seed, adam, backend, dense_group, expert_group));
  PSYNC_RETURN_IF_ERROR(model->Init());
  return model;
}

RankModel::RankModel(const ModelConfig& config, uint64_t seed, const AdamParams& adam,
                     ComputeBackend* backend, Collective* dense_group, Collective* expert_group)
    : config_(config),
      seed_(seed),
      adam_(adam),
      backend_(backend),
      dense_group_(dense_group),
      expert_group_(expert_group),
      layouts_{config.Layout(ParamKind::kDense), config.Layout(ParamKind::kExpert)} {}

absl::Status RankModel::Init() {
  parts_.resize(config_.num_chunks * 2);
  auto allocate = [this](int64_t bytes, std::unique_ptr<DeviceBuffer>* out) -> absl::Status {
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = backend_->Allocate(bytes);
    if (!buffer.ok()) return buffer.status();
    *out = std::move(*buffer);
    return absl::OkStatus();
  };
  for (int c = 0; c < config_.num_chunks; ++c) {
    for (ParamKind kind : kParamKinds) {
      const BufferLayout& layout = layouts_[static_cast<int>(kind)];
      Part& p = part(c, kind);
      const int64_t shard_bytes = 4 * layout.shard_elements();
      PSYNC_RETURN_IF_ERROR(allocate(layout.buffer_bytes(), &p.buffer));
      PSYNC_RETURN_IF_ERROR(allocate(shard_bytes, &p.main_param));
      PSYNC_RETURN_IF_ERROR(allocate(shard_bytes, &p.exp_avg));
      PSYNC_RETURN_IF_ERROR(allocate(shard_bytes, &p.exp_avg_sq));
      PSYNC_RETURN_IF_ERROR(allocate(shard_bytes, &p.main_grad));
      PSYNC_RETURN_IF_ERROR(allocate(4 * layout.padded_elements(), &p.weights));

      // This rank's shard of the initial main params, bucket by bucket.
      const std::vector<float> main = InitialMainParams(config_, seed_, c, kind);
      std::vector<float> shard(layout.shard_elements());
      const int group_rank = config_.GroupRank(kind);
      for (int b = 0; b < layout.buckets(); ++b) {
        for (int64_t j = 0; j < layout.shard_bucket_elements(); ++j) {
          shard[layout.ShardIndexOf(b, j)] = main[layout.ElementOf(b, group_rank, j)];
        }
      }
      PSYNC_RETURN_IF_ERROR(
          backend_->CopyFromHost(absl::Span<const float>(shard), p.main_param->As<float>()));
      const std::vector<float> weights = InitialWeights(config_, seed_, c, kind);
      PSYNC_RETURN_IF_ERROR(
          backend_->CopyFromHost(absl::Span<const float>(weights), p.weights->As<float>()));
    }
  }
  return absl::OkStatus();
}

absl::Status RankModel::WriteGradients(int64_t step, GradientSource source) {
  for (int c = 0; c < config_.num_chunks; ++c) {
    for (ParamKind kind : kParamKinds) {
      const BufferLayout& layout = layouts_[static_cast<int>(kind)];
      absl::Span<float> grads = part(c, kind).buffer->As<float>();
      if (source == GradientSource::kBackend) {
        PSYNC_RETURN_IF_ERROR(
            backend_->FillSynthetic(seed_, step, config_.rank, GradientIndex(c, kind, 0), grads));
        continue;
      }
      host_scratch_.resize(layout.padded_elements());
      FillExactGradients(seed_, step, config_.rank, c, kind, 0, layout.real_elements(),
                         absl::MakeSpan(host_scratch_));
      PSYNC_RETURN_IF_ERROR(backend_->CopyFromHost(absl::Span<const float>(host_scratch_), grads));
    }
  }
  return absl::OkStatus();
}

absl::Status RankModel::ReduceScatterGradients() {
  for (int c = 0; c < config_.num_chunks; ++c) {
    for (ParamKind kind : kParamKinds) {
      const BufferLayout& layout = layouts_[static_cast<int>(kind)];
      Part& p = part(c, kind);
      const float* grads = p.buffer->As<float>().data();
      float* main_grad = p.main_grad->As<float>().data();
      for (int b = 0; b < layout.buckets(); ++b) {
        PSYNC_RETURN_IF_ERROR(group(kind)->ReduceScatterSum(grads + b * layout.bucket_elements(),
                                                            main_grad + layout.ShardIndexOf(b, 0),
                                                            layout.shard_bucket_elements()));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RankModel::Stage(int chunk, ParamKind kind, int64_t step) {
  if (chunk < 0 || chunk >= config_.num_chunks) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk, " out of range"));
  }
  const BufferLayout& layout = layouts_[static_cast<int>(kind)];
  Part& p = part(chunk, kind);
  const int64_t s = layout.shard_bucket_elements();
  for (int b = 0; b < layout.buckets(); ++b) {
    const int64_t first = layout.ShardIndexOf(b, 0);
    PSYNC_RETURN_IF_ERROR(backend_->AdamStepAndStage(
        adam_, step + 1, p.main_param->As<float>().subspan(first, s),
        p.main_grad->As<float>().subspan(first, s), p.exp_avg->As<float>().subspan(first, s),
        p.exp_avg_sq->As<float>().subspan(first, s), layout.dtype(),
        p.buffer->bytes().subspan(layout.send_offset_bytes(b), layout.staged_shard_bytes())));
  }
  return absl::OkStatus();
}

absl::Status RankModel::Gather(int chunk, ParamKind kind) {
  const BufferLayout& layout = layouts_[static_cast<int>(kind)];
  Part& p = part(chunk, kind);
  const absl::Span<uint8_t> bytes = p.buffer->bytes();
  const absl::Span<float> weights = p.weights->As<float>();
  const int64_t t = layout.staged_shard_bytes();
  const int64_t s = layout.shard_bucket_elements();
  for (int b = 0; b < layout.buckets(); ++b) {
    const auto start = std::chrono::steady_clock::now();
    PSYNC_RETURN_IF_ERROR(group(kind)->AllGather(bytes.data() + layout.send_offset_bytes(b),
                                                 bytes.data() + layout.gather_offset_bytes(b), t));
    GatherStats& stats = gather_stats_[static_cast<int>(kind)];
    stats.seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats.bytes += layout.gather_bytes();
    ++stats.calls;
    for (int r = 0; r < layout.group_size(); ++r) {
      PSYNC_RETURN_IF_ERROR(backend_->DequantizeCopy(
          layout.dtype(), bytes.subspan(layout.gathered_shard_offset_bytes(b, r), t),
          weights.subspan(layout.ElementOf(b, r, 0), s)));
    }
  }
  return absl::OkStatus();
}

absl::Status RankModel::Sync(int chunk) {
  if (chunk < 0 || chunk >= config_.num_chunks) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk, " out of range"));
  }
  // Gather every bucket group of the chunk first, then zero the shared buffers, as Megatron's
  // param sync does.
  for (ParamKind kind : kParamKinds) PSYNC_RETURN_IF_ERROR(Gather(chunk, kind));
  for (ParamKind kind : kParamKinds) {
    PSYNC_RETURN_IF_ERROR(backend_->Zero(part(chunk, kind).buffer->bytes()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> RankModel::Weights(int chunk, ParamKind kind) {
  if (chunk < 0 || chunk >= config_.num_chunks) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk, " out of range"));
  }
  const absl::Span<float> weights = part(chunk, kind).weights->As<float>();
  std::vector<float> out(weights.size());
  PSYNC_RETURN_IF_ERROR(
      backend_->CopyToHost(absl::Span<const float>(weights), absl::MakeSpan(out)));
  return out;
}

absl::StatusOr<std::vector<float>> RankModel::MainParamShard(int chunk, ParamKind kind) {
  if (chunk < 0 || chunk >= config_.num_chunks) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk, " out of range"));
  }
  const absl::Span<float> shard = part(chunk, kind).main_param->As<float>();
  std::vector<float> out(shard.size());
  PSYNC_RETURN_IF_ERROR(backend_->CopyToHost(absl::Span<const float>(shard), absl::MakeSpan(out)));
  return out;
}

}  // namespace worker
}  // namespace psync
