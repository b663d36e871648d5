// Staged parameter formats: bf16 and OCP MXFP8, over arrays, on the host.
//
// A DistOpt stages its updated fp32 parameter shard into its region of the param buffer in one of
// these formats; after the all-gather every rank decodes the whole buffer into its fp32 weights.
// The scalar conversions live in scalar_formats.h and are shared bit-for-bit with the CUDA kernels.
//
// Region layouts (byte spans, no alignment required by these functions):
//   bf16:  n little-endian uint16 codes, 2n bytes.
//   MXFP8: n E4M3 element bytes, then ceil(n/32) E8M0 scale bytes (Mxfp8Layout). Element i
//          belongs to block i / 32; the last block is partial when n is not a multiple of 32.
//
// bf16 rules: round-to-nearest-even; finite values that round beyond bf16's max become +-Inf
// (exactly as IEEE rounding does); +-Inf stay +-Inf; NaN stays NaN (quiet bit set, sign and top
// payload bits kept); fp32 subnormals round like any other value (bf16 has the same exponent
// range); -0 stays -0. Decoding is exact.
//
// MXFP8 rules (OCP Microscaling spec v1.0, E4M3 elements, emax_elem = 8):
//   - Scale: shared_exp = floor(log2(amax)) - 8, amax the block's largest |x|; stored as E8M0
//     (biased by 127) and clamped at the bottom to 2^-127 (code 0x00).
//   - Elements: E4M3(x / 2^shared_exp), round-to-nearest-even, saturated to +-448. Because
//     amax / 2^shared_exp lies in [256, 512), elements in [448, 512) * 2^shared_exp saturate:
//     this is the spec's behaviour, not an error.
//   - All-zero block: scale 0x00 (the clamp of floor(log2(0)) = -inf); elements are zeros that
//     keep each input's sign; decodes to exactly the input zeros.
//   - fp32 subnormal inputs: handled exactly by the rules above. A block whose amax is below
//     2^-119 (subnormals included) gets the clamped scale 0x00, so its elements lose precision
//     and magnitudes up to 2^-137 decode to zero.
//   - Values at exactly +-448 * 2^shared_exp encode to code 0x7E/0xFE and decode exactly.
//   - NaN or +-Inf anywhere in a block: the block's scale becomes NaN (0xFF) and every element
//     of the block is 0x7F, so the whole block decodes to NaN. Corruption stays visible after the
//     all-gather instead of being clipped into plausible numbers. Encoding never fails on values.
//   - Decoding: element * 2^shared_exp, exact; E4M3 code 0x7F/0xFF or scale 0xFF decode to NaN.
//
// Error behaviour: the array functions return INVALID_ARGUMENT when a span has the wrong size for
// the other and then write nothing. All functions are thread-safe (no state).

#ifndef PSYNC_WORKER_COMPUTE_FORMATS_H_
#define PSYNC_WORKER_COMPUTE_FORMATS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "worker/compute/scalar_formats.h"

namespace psync {
namespace worker {

// Byte layout of an MXFP8 region of `num_elements` elements.
struct Mxfp8Layout {
  int64_t num_elements = 0;

  int64_t num_blocks() const { return Mxfp8NumBlocks(num_elements); }
  // The E4M3 element bytes start at offset 0; element i is byte i.
  int64_t elements_offset() const { return 0; }
  // The E8M0 scale bytes follow the elements; block b's scale is byte scales_offset() + b.
  int64_t scales_offset() const { return num_elements; }
  int64_t total_bytes() const { return num_elements + num_blocks(); }
};

// "bf16" / "mxfp8".
absl::string_view ParamDtypeName(ParamDtype dtype);
// Inverse of ParamDtypeName; INVALID_ARGUMENT for any other text.
absl::StatusOr<ParamDtype> ParseParamDtype(absl::string_view name);

// Bytes a staged region of `num_elements` elements occupies: 2n (bf16) or n + ceil(n/32)
// (MXFP8). `num_elements` must be >= 0.
int64_t StagedBytes(ParamDtype dtype, int64_t num_elements);

// values -> bf16 codes. Requires out.size() == 2 * values.size().
absl::Status EncodeBf16(absl::Span<const float> values, absl::Span<uint8_t> out);
// bf16 codes -> values. Requires in.size() == 2 * values.size().
absl::Status DecodeBf16(absl::Span<const uint8_t> in, absl::Span<float> values);

// values -> MXFP8 region. Requires out.size() == Mxfp8Layout{values.size()}.total_bytes().
absl::Status EncodeMxfp8(absl::Span<const float> values, absl::Span<uint8_t> out);
// MXFP8 region -> values. Requires in.size() == Mxfp8Layout{values.size()}.total_bytes().
absl::Status DecodeMxfp8(absl::Span<const uint8_t> in, absl::Span<float> values);

// Dispatch on dtype. Requires the region size to be StagedBytes(dtype, values.size()).
absl::Status EncodeStaged(ParamDtype dtype, absl::Span<const float> values,
                          absl::Span<uint8_t> out);
absl::Status DecodeStaged(ParamDtype dtype, absl::Span<const uint8_t> in, absl::Span<float> values);

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COMPUTE_FORMATS_H_
