// ReferenceModel: the whole synthetic model computed on the CPU, as one rank sees it: the dense
// parameters of every chunk and the expert parameters of this rank's EP rank, unsharded.
//
// Step(s) does what the whole job does in step s, without collectives: it sums the exact
// synthetic gradients of every member of each sync group (every rank can compute every other
// rank's gradients, synthetic_model.h), runs AdamW (adam_update.h) on every element, and encodes
// and decodes the result in the staged dtype. ExpectedWeights() is then exactly what every rank's
// model weights must hold after the step's param sync:
//   - the gradient sums are exact, so the order of the collective's additions does not matter;
//   - AdamW is element-wise, so sharding does not change any element's result, and its
//     operations are the same correctly rounded fp32 operations as the backends' (this library
//     is built with -ffp-contract=off, like the CPU backend; the CUDA kernels use _rn intrinsics);
//   - MXFP8 blocks never straddle a shard (shards are whole blocks), so encoding the unsharded
//     array gives the same blocks and scales as encoding each shard.
//
// Thread-compatible: one thread at a time. Memory: 4 fp32 arrays per chunk and kind.
#ifndef PSYNC_WORKER_REFERENCE_MODEL_H_
#define PSYNC_WORKER_REFERENCE_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/compute/adam_update.h"
#include "worker/model_layout.h"

namespace psync {
namespace worker {

// The weights every rank starts from: the initial main parameters, encoded and decoded in the
// staged dtype. padded_elements() values.
std::vector<float> InitialWeights(const ModelConfig& config, uint64_t seed, int chunk,
                                  ParamKind kind);
// The initial fp32 main parameters, padded_elements() values.
std::vector<float> InitialMainParams(const ModelConfig& config, uint64_t seed, int chunk,
                                     ParamKind kind);

class ReferenceModel {
 public:
  // `config` must be valid (ModelConfig::Validate).
  ReferenceModel(const ModelConfig& config, uint64_t seed, const AdamParams& adam);

  // Runs `step`, which must be the step after the last one run (0 first).
  // Errors: FAILED_PRECONDITION for a step out of order, state unchanged.
  absl::Status Step(int64_t step);

  // After the last Step(): the expected model weights of (chunk, kind), padded_elements() values.
  absl::Span<const float> ExpectedWeights(int chunk, ParamKind kind) const;
  // The fp32 main parameters of (chunk, kind), unsharded.
  absl::Span<const float> MainParams(int chunk, ParamKind kind) const;
  // The number of steps run.
  int64_t steps_run() const { return next_step_; }

 private:
  struct State {
    std::vector<float> main_param;
    std::vector<float> exp_avg;
    std::vector<float> exp_avg_sq;
    std::vector<float> expected;
  };
  const State& state(int chunk, ParamKind kind) const {
    return states_[chunk * 2 + static_cast<int>(kind)];
  }

  // Constant after construction.
  const ModelConfig config_;
  const uint64_t seed_;
  const AdamParams adam_;

  std::vector<State> states_;  // by chunk * 2 + kind
  int64_t next_step_ = 0;
};

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_REFERENCE_MODEL_H_
