#include "worker/synthetic_model.h"

#include <cmath>

#include "worker/compute/synthetic.h"

namespace psync {
namespace worker {
namespace {

// Separates the initial parameters' streams from the gradients'.
constexpr uint64_t kInitSalt = 0x5DEECE66DA3B1F27ull;

}  // namespace

int64_t GradientIndex(int chunk, ParamKind kind, int64_t element) {
  return ((static_cast<int64_t>(chunk) * 2 + static_cast<int64_t>(kind)) << 40) + element;
}

float ExactGradient(uint64_t seed, int64_t step, int rank, int chunk, ParamKind kind,
                    int64_t element, int64_t real_elements) {
  if (element >= real_elements) return 0.0f;
  const float g = SyntheticGradient(seed, step, rank, GradientIndex(chunk, kind, element));
  // g * 1024 is exact (a power-of-two scale); rounding it to an integer and scaling back is too.
  return std::nearbyint(g * 1024.0f) * kGradientGrid;
}

void FillExactGradients(uint64_t seed, int64_t step, int rank, int chunk, ParamKind kind,
                        int64_t first_element, int64_t real_elements, absl::Span<float> out) {
  const uint64_t key = SyntheticStreamKey(seed, step, rank);
  const int64_t base = GradientIndex(chunk, kind, 0);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t element = first_element + static_cast<int64_t>(i);
    if (element >= real_elements) {
      out[i] = 0.0f;
      continue;
    }
    out[i] = std::nearbyint(SyntheticValue(key, base + element) * 1024.0f) * kGradientGrid;
  }
}

float InitialParam(uint64_t seed, int chunk, ParamKind kind, int ep_rank, int64_t element,
                   int64_t real_elements) {
  if (element >= real_elements) return 0.0f;
  const int64_t owner = kind == ParamKind::kDense ? -1 : ep_rank;
  return 0.5f *
         SyntheticGradient(seed ^ kInitSalt, chunk, owner, GradientIndex(chunk, kind, element));
}

}  // namespace worker
}  // namespace psync
