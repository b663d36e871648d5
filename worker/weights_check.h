// Checks of fp32 model weights: the checksum each rank reports in SyncDone, and the comparison
// with the CPU reference that tells how a chunk's weights went wrong.
//
// Thread-safe (pure functions).
#ifndef PSYNC_WORKER_WEIGHTS_CHECK_H_
#define PSYNC_WORKER_WEIGHTS_CHECK_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace psync {
namespace worker {

// 64-bit FNV-1a over the little-endian bytes of `weights`: the same weights give the same
// checksum on every rank and every build. The checksum of nothing is the FNV offset basis.
uint64_t WeightsChecksum(absl::Span<const float> weights);

// How `actual` differs from `expected`, element by element.
struct WeightDiff {
  int64_t elements = 0;
  // Elements with |actual - expected| > tolerance, or a NaN/Inf where a finite value was
  // expected.
  int64_t mismatched = 0;
  // Mismatched elements that are exactly zero.
  int64_t zeroed = 0;
  // Mismatched elements that are NaN or +-Inf.
  int64_t nonfinite = 0;
  // Elements of `actual` that are exactly zero, mismatched or not (a weight whose expected value
  // is 0 too is not a mismatch, but still a zero: MXFP8 flushes small values of a block to 0).
  int64_t actual_zeros = 0;
  // Largest |actual - expected| over the finite mismatched elements.
  double max_abs_error = 0.0;
  // The first mismatched element (-1 when none).
  int64_t first_mismatch = -1;

  bool ok() const { return mismatched == 0; }
  double zeroed_fraction() const { return elements > 0 ? double(zeroed) / elements : 0.0; }
  double nonfinite_fraction() const { return elements > 0 ? double(nonfinite) / elements : 0.0; }
  double mismatched_fraction() const { return elements > 0 ? double(mismatched) / elements : 0.0; }
  // "100.0% of 4096 elements wrong: 100.0% zeroed, 0.0% non-finite, max abs error 0.5"
  std::string Describe() const;
};

// Compares element-wise; `tolerance` >= 0 is the largest accepted |actual - expected| (0: the
// values must be equal; +0 and -0 compare equal). Requires actual.size() == expected.size().
WeightDiff CompareWeights(absl::Span<const float> actual, absl::Span<const float> expected,
                          float tolerance);

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_WEIGHTS_CHECK_H_
