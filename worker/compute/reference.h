// Straightforward scalar reference implementations that the backend tests compare against.
//
// Written from the definitions, not from the optimized code: AdamW in double precision (the
// formula of adam_update.h, no fp32 rounding until the result is stored), and encoders that
// search for the nearest representable value (formats.h's rules) instead of manipulating bits.
// Slow on purpose; for tests only. Thread-safe (no state).
//
// The synthetic gradient used by tests and the worker is SyntheticGradient() in synthetic.h.

#ifndef PSYNC_WORKER_COMPUTE_REFERENCE_H_
#define PSYNC_WORKER_COMPUTE_REFERENCE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/compute/adam_update.h"
#include "worker/compute/formats.h"

namespace psync {
namespace worker {

// One AdamW element step in double precision. `step` >= 1.
struct ReferenceAdamState {
  double param;
  double exp_avg;
  double exp_avg_sq;
};
ReferenceAdamState ReferenceAdamUpdate(const AdamParams& hp, int64_t step,
                                       const ReferenceAdamState& state, double grad);

// The value of a bf16 code / an E4M3 code (NaN codes give NaN), and 2^(code - 127) for an E8M0
// scale code (NaN for 0xFF).
double ReferenceBf16Value(uint16_t code);
double ReferenceE4m3Value(uint8_t code);
double ReferenceE8m0Value(uint8_t code);

// The bf16 code nearest to x (ties to the even code; past the largest finite value, the
// rounding continues to Inf as IEEE does). NaN: x's top 16 bits with the quiet bit set.
uint16_t ReferenceEncodeBf16(float x);

// The E4M3 code nearest to q (ties to the even code); |q| >= 448 saturates to +-448; NaN -> 0x7F
// with q's sign.
uint8_t ReferenceEncodeE4m3(double q);

// An MXFP8 region (Mxfp8Layout) from values, with the scale computed by frexp in double.
// INVALID_ARGUMENT if out has the wrong size.
absl::Status ReferenceEncodeMxfp8(absl::Span<const float> values, absl::Span<uint8_t> out);

// Reference AdamStepAndStage over arrays: each element is widened to double, updated with
// ReferenceAdamUpdate, and stored back rounded to fp32; then the rounded params are encoded
// into `staged` with the reference encoders. Arguments as ComputeBackend::AdamStepAndStage.
absl::Status ReferenceAdamStepAndStage(const AdamParams& hp, int64_t step,
                                       absl::Span<float> main_param, absl::Span<const float> grad,
                                       absl::Span<float> exp_avg, absl::Span<float> exp_avg_sq,
                                       ParamDtype dtype, absl::Span<uint8_t> staged);

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COMPUTE_REFERENCE_H_
