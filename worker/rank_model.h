// RankModel: one rank's part of the synthetic MoE model on a compute backend, and the DistOpt
// operations of a training step over its sync groups.
//
// State per chunk and kind (dense, expert), all in backend memory:
//   - the shared param/grad buffer (model_layout.h has its byte layout);
//   - the DistOpt's fp32 shard: main params, exp_avg, exp_avg_sq, and the main-grad shard that
//     the reduce-scatter fills (Megatron copies the reduced shard out of the grad buffer into
//     main_grad; here the reduce-scatter writes it there directly);
//   - the fp32 model weights of the whole chunk (every rank holds all of them).
//
// A step, in Megatron's order:
//   WriteGradients(step)         backward: every chunk's buffers hold this rank's fp32 gradients
//   ReduceScatterGradients()     each group rank gets its shard of the sum, in main_grad
//   Stage(chunk, kind, step)     the kind's DistOpt: AdamW on the shard, then the result is
//                                staged (bf16 / MXFP8) into the rank's send region of the buffer
//   Sync(chunk)                  the chunk's param sync: all-gather the dense and the expert
//                                buffers, dequantize every gathered shard into the model weights,
//                                zero both buffers
// Nothing stops a caller from syncing a chunk before both kinds staged it, or twice: that is the
// Megatron #4800 bug, and the worker's --sync=naive mode does exactly that. Sync() gathers
// whatever the buffers hold: gradient bytes where a DistOpt has not staged yet, zeros after an
// earlier sync.
//
// Errors: the backend's and the collectives' statuses, unchanged. After a collective error the
// groups are unusable (collective.h); the model's state is then unspecified.
//
// Thread-compatible: one thread at a time (the collectives are ordered operations).
// Ownership: the backend and the collectives are borrowed and must outlive the model.
#ifndef PSYNC_WORKER_RANK_MODEL_H_
#define PSYNC_WORKER_RANK_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/collective/collective.h"
#include "worker/compute/adam_update.h"
#include "worker/compute/compute_backend.h"
#include "worker/model_layout.h"

namespace psync {
namespace worker {

// Where the step's gradients come from.
enum class GradientSource {
  // ExactGradient() computed on the host and copied in: sums are exact, so the result can be
  // verified bit for bit against the ReferenceModel.
  kExactHost,
  // ComputeBackend::FillSynthetic on the backend (the GPU for CUDA): no host work or copies, but
  // the sums round in the collective's order, so the weights are not verified.
  kBackend,
};

// Time and bytes spent in the all-gathers of the param syncs, since the model was created.
struct GatherStats {
  int64_t calls = 0;
  int64_t bytes = 0;     // gathered bytes (the output size), summed over calls
  double seconds = 0.0;  // wall time inside Collective::AllGather
};

class RankModel {
 public:
  // Allocates every buffer on `backend` and loads the initial state (InitialMainParams,
  // InitialWeights of reference_model.h). `dense_group` and `expert_group` are this rank's "dp"
  // and "edp<k>" groups, of the sizes config.GroupSize() gives, with this rank at
  // config.GroupRank(). Errors: INVALID_ARGUMENT for an invalid config or groups of the wrong
  // size or rank; RESOURCE_EXHAUSTED when the backend is out of memory.
  static absl::StatusOr<std::unique_ptr<RankModel>> Create(const ModelConfig& config, uint64_t seed,
                                                           const AdamParams& adam,
                                                           ComputeBackend* backend,
                                                           Collective* dense_group,
                                                           Collective* expert_group);

  RankModel(const RankModel&) = delete;
  RankModel& operator=(const RankModel&) = delete;

  // Backward: fills every chunk's buffers with this rank's gradients of `step`.
  absl::Status WriteGradients(int64_t step, GradientSource source);
  // Reduce-scatters every chunk's buffers over their groups into the main-grad shards.
  absl::Status ReduceScatterGradients();
  // The `kind` DistOpt's step for `chunk`: AdamW (step + 1, 1-based) and staging.
  absl::Status Stage(int chunk, ParamKind kind, int64_t step);
  // The chunk's param sync: all-gather both buffers, dequantize into the weights, zero them.
  absl::Status Sync(int chunk);

  // Host copies of the model weights (padded_elements() values) and of the main-param shard.
  absl::StatusOr<std::vector<float>> Weights(int chunk, ParamKind kind);
  absl::StatusOr<std::vector<float>> MainParamShard(int chunk, ParamKind kind);

  const ModelConfig& config() const { return config_; }
  // The all-gathers of the `kind` buffers so far.
  const GatherStats& gather_stats(ParamKind kind) const {
    return gather_stats_[static_cast<int>(kind)];
  }
  // Starts the all-gather statistics over (e.g. after warm-up steps).
  void ResetGatherStats() { gather_stats_[0] = gather_stats_[1] = GatherStats(); }

 private:
  struct Part {
    std::unique_ptr<DeviceBuffer> buffer;      // shared param/grad buffer
    std::unique_ptr<DeviceBuffer> main_param;  // fp32 shard
    std::unique_ptr<DeviceBuffer> exp_avg;
    std::unique_ptr<DeviceBuffer> exp_avg_sq;
    std::unique_ptr<DeviceBuffer> main_grad;
    std::unique_ptr<DeviceBuffer> weights;  // fp32, whole chunk
  };

  RankModel(const ModelConfig& config, uint64_t seed, const AdamParams& adam,
            ComputeBackend* backend, Collective* dense_group, Collective* expert_group);

  absl::Status Init();
  Part& part(int chunk, ParamKind kind) { return parts_[chunk * 2 + static_cast<int>(kind)]; }
  Collective* group(ParamKind kind) {
    return kind == ParamKind::kDense ? dense_group_ : expert_group_;
  }
  absl::Status Gather(int chunk, ParamKind kind);

  // Constant after construction.
  const ModelConfig config_;
  const uint64_t seed_;
  const AdamParams adam_;
  ComputeBackend* const backend_;
  Collective* const dense_group_;
  Collective* const expert_group_;
  const BufferLayout layouts_[2];  // by kind

  std::vector<Part> parts_;  // by chunk * 2 + kind
  std::vector<float> host_scratch_;
  GatherStats gather_stats_[2];  // by kind
};

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_RANK_MODEL_H_
