// The synthetic model's values: every rank's gradients and the initial parameters, as pure
// functions, so that any rank can recompute any other rank's values (the CPU reference does).
//
// Gradients. The gradient of element e of (chunk, kind) on `rank` at `step` is
// SyntheticGradient(seed, step, rank, GradientIndex(chunk, kind, e)) (worker/compute/synthetic.h,
// a value on a grid of 2^-23 in [-1, 1)) rounded to the nearest multiple of 2^-10. Multiples of
// 2^-10 in [-1, 1] summed over W <= 16384 ranks stay multiples of 2^-10 below 2^14 in magnitude:
// every partial sum is exact in fp32, so the reduce-scatter's result does not depend on the
// order in which a collective adds (ring, tree, NCCL or Gloo). Padding elements (e >= the real
// element count) have zero gradients.
//
// ComputeBackend::FillSynthetic(seed, step, rank, GradientIndex(chunk, kind, 0), ...) produces
// the same values before the rounding; the worker uses it only when it does not verify (--bench),
// to keep host work out of the timed step.
//
// Initial parameters: dense ones depend on (seed, chunk, element), expert ones also on the EP
// rank that owns them; padding elements start at zero.
//
// Thread-safe (pure functions).
#ifndef PSYNC_WORKER_SYNTHETIC_MODEL_H_
#define PSYNC_WORKER_SYNTHETIC_MODEL_H_

#include <cstdint>

#include "absl/types/span.h"
#include "worker/model_layout.h"

namespace psync {
namespace worker {

// The gradient grid: 2^-10.
inline constexpr float kGradientGrid = 1.0f / 1024.0f;

// The synthetic stream index of element `element` of (chunk, kind): chunk and kind above bit 40.
int64_t GradientIndex(int chunk, ParamKind kind, int64_t element);

// The exact gradient described above; 0 for element >= real_elements.
float ExactGradient(uint64_t seed, int64_t step, int rank, int chunk, ParamKind kind,
                    int64_t element, int64_t real_elements);

// out[i] = ExactGradient(..., first_element + i, real_elements).
void FillExactGradients(uint64_t seed, int64_t step, int rank, int chunk, ParamKind kind,
                        int64_t first_element, int64_t real_elements, absl::Span<float> out);

// The initial fp32 main parameter of an element, in [-0.5, 0.5); `ep_rank` is ignored for dense
// parameters. 0 for element >= real_elements.
float InitialParam(uint64_t seed, int chunk, ParamKind kind, int ep_rank, int64_t element,
                   int64_t real_elements);

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_SYNTHETIC_MODEL_H_
