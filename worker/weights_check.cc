#include "worker/weights_check.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"

namespace psync {
namespace worker {

uint64_t WeightsChecksum(absl::Span<const float> weights) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (float w : weights) {
    uint32_t bits;
    std::memcpy(&bits, &w, sizeof(bits));
    for (int i = 0; i < 4; ++i) {
      h ^= (bits >> (8 * i)) & 0xffu;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

WeightDiff CompareWeights(absl::Span<const float> actual, absl::Span<const float> expected,
                          float tolerance) {
  WeightDiff d;
  d.elements = static_cast<int64_t>(expected.size());
  for (size_t i = 0; i < expected.size() && i < actual.size(); ++i) {
    const float a = actual[i];
    const float e = expected[i];
    if (a == 0.0f) ++d.actual_zeros;
    if (a == e) continue;
    const bool finite = std::isfinite(a);
    const double error = std::fabs(static_cast<double>(a) - static_cast<double>(e));
    if (finite && error <= tolerance) continue;
    if (d.first_mismatch < 0) d.first_mismatch = static_cast<int64_t>(i);
    ++d.mismatched;
    if (!finite) {
      ++d.nonfinite;
      continue;
    }
    if (a == 0.0f) ++d.zeroed;
    if (error > d.max_abs_error) d.max_abs_error = error;
  }
  return d;
}

std::string WeightDiff::Describe() const {
  return absl::StrFormat(
      "%.1f%% of %d elements wrong: %.1f%% zeroed, %.1f%% non-finite, "
      "max abs error %.4g",
      100.0 * mismatched_fraction(), elements, 100.0 * zeroed_fraction(),
      100.0 * nonfinite_fraction(), max_abs_error);
}

}  // namespace worker
}  // namespace psync
