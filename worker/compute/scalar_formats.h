// Scalar conversions between fp32 and the staged parameter formats, shared by host and device.
//
// These are the bit-exact building blocks of formats.h (the host API over arrays) and of the CUDA
// kernels: both call the same functions, so the CPU and CUDA backends produce identical bytes.
// Every function is pure, total (defined for every input bit pattern) and thread-safe. The rules
// for special values are stated in formats.h; this header only implements them.
//
// No Abseil and no host-only standard library here: nvcc compiles this header for the device.

#ifndef PSYNC_WORKER_COMPUTE_SCALAR_FORMATS_H_
#define PSYNC_WORKER_COMPUTE_SCALAR_FORMATS_H_

#include <cstdint>
#include <cstring>

#include "worker/compute/host_device.h"

namespace psync {
namespace worker {

// The format in which a DistOpt stages its updated parameters into the param buffer.
enum class ParamDtype : int {
  kBf16 = 1,   // 2 bytes per element.
  kMxfp8 = 2,  // OCP MXFP8 (E4M3 elements, E8M0 scale per 32 elements).
};

// OCP MX block size: elements that share one E8M0 scale.
constexpr int kMxfp8BlockSize = 32;
// E4M3's largest finite magnitude, 1.75 * 2^8, and its code.
constexpr float kE4m3Max = 448.0f;
constexpr uint8_t kE4m3MaxCode = 0x7E;
// The E4M3 NaN code (sign bit clear; 0xFF is the other NaN).
constexpr uint8_t kE4m3NanCode = 0x7F;
// The E8M0 NaN code.
constexpr uint8_t kE8m0NanCode = 0xFF;
// log2 of the largest power of two below kE4m3Max: emax_elem of the OCP MX spec for E4M3.
constexpr int kE4m3Emax = 8;

// Bit casts. memcpy on the host (no aliasing issues), intrinsics on the device.
PSYNC_HOST_DEVICE inline uint32_t FloatToBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
#endif
}

PSYNC_HOST_DEVICE inline float BitsToFloat(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

// |x| as bits. For non-negative floats the bit order is the numeric order, every NaN compares
// above +Inf (0x7F800000), so the maximum of these over a block is the block's max abs value, and
// it is >= 0x7F800000 exactly when the block holds a NaN or an Inf.
PSYNC_HOST_DEVICE inline uint32_t AbsBits(float x) { return FloatToBits(x) & 0x7FFFFFFFu; }

// ---- bf16 ----------------------------------------------------------------------------------

// fp32 -> bf16 with round-to-nearest-even. NaN stays NaN: sign and the top 6 payload bits are
// kept and the quiet bit is set. Finite values that round past bf16's max become Inf.
PSYNC_HOST_DEVICE inline uint16_t EncodeBf16(float x) {
  const uint32_t bits = FloatToBits(x);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  const uint32_t rounding_bias = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

// bf16 -> fp32, exact.
PSYNC_HOST_DEVICE inline float DecodeBf16(uint16_t code) {
  return BitsToFloat(static_cast<uint32_t>(code) << 16);
}

// ---- FP8 E4M3 (OCP "E4M3FN": bias 7, no Inf, NaN = S.1111.111)
// -----------------------------------

// fp32 -> E4M3 with round-to-nearest-even and saturation: |x| >= 448 (Inf included) becomes
// +-448 (code 0x7E / 0xFE). NaN becomes 0x7F with x's sign bit. Values below the smallest
// subnormal's half (2^-10) become a zero of x's sign. fp32 subnormal inputs are handled exactly.
PSYNC_HOST_DEVICE inline uint8_t EncodeE4m3(float x) {
  const uint32_t bits = FloatToBits(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t a = bits & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint8_t>(sign | kE4m3NanCode);
  if (a >= 0x43E00000u) return static_cast<uint8_t>(sign | kE4m3MaxCode);  // |x| >= 448.
  if (a < 0x3C800000u) {
    // |x| < 2^-6, E4M3's smallest normal: the code is round(|x| * 2^9) (0..8; 8 is the code of
    // 2^-6, the smallest normal, so the carry lands on the right code). |x| = mant * 2^(e - 150)
    // with e the effective fp32 exponent, so |x| * 2^9 = mant >> (141 - e); round that shift.
    const uint32_t exp_field = a >> 23;
    const uint32_t mant = exp_field != 0 ? ((a & 0x7FFFFFu) | 0x800000u) : a;
    const uint32_t shift = 141u - (exp_field != 0 ? exp_field : 1u);  // >= 21.
    if (shift > 24u) return sign;  // mant < 2^24 <= half of 2^shift: rounds to zero.
    uint32_t rounded = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (rounded & 1u) != 0)) ++rounded;
    return static_cast<uint8_t>(sign | rounded);
  }
  // Normal range [2^-6, 448): round the fp32 mantissa to 3 bits (a carry moves into the exponent,
  // which is right), then rebias the exponent from 127 to 7.
  const uint32_t rounded = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
  return static_cast<uint8_t>(sign | (rounded - (120u << 3)));
}

// E4M3 -> fp32, exact. 0x7F and 0xFF decode to NaN.
PSYNC_HOST_DEVICE inline float DecodeE4m3(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t magnitude = code & 0x7Fu;
  if (magnitude == kE4m3NanCode) return BitsToFloat(sign | 0x7FC00000u);
  const uint32_t exp_field = magnitude >> 3;
  const uint32_t mant = magnitude & 7u;
  if (exp_field == 0) {
    // Subnormal: mant * 2^-9, exact in fp32.
    return BitsToFloat(sign | FloatToBits(static_cast<float>(mant) * 0.001953125f));
  }
  return BitsToFloat(sign | ((exp_field + 120u) << 23) | (mant << 20));
}

// ---- E8M0 scales and MXFP8 blocks
// ----------------------------------------------------------------

// E8M0 -> fp32: 2^(code - 127); 0x00 is 2^-127 (an fp32 subnormal); 0xFF is NaN.
PSYNC_HOST_DEVICE inline float DecodeE8m0(uint8_t code) {
  if (code == kE8m0NanCode) return BitsToFloat(0x7FC00000u);
  if (code == 0) return BitsToFloat(0x00400000u);
  return BitsToFloat(static_cast<uint32_t>(code) << 23);
}

// The reciprocal of a finite scale, 2^(127 - code), exact (code 254 gives 2^-127).
PSYNC_HOST_DEVICE inline float E8m0Reciprocal(uint8_t finite_code) {
  return DecodeE8m0(static_cast<uint8_t>(254u - finite_code));
}

// The block's shared scale from the max of AbsBits() over its elements (OCP MX spec):
// shared_exp = floor(log2(amax)) - kE4m3Emax, clamped to E8M0's smallest exponent -127, so the
// biased code is max(fp32 exponent field of amax - 8, 0). An all-zero block (amax 0) and blocks
// whose amax is below 2^-119 get code 0x00 (2^-127). NaN or Inf anywhere gives 0xFF (NaN).
PSYNC_HOST_DEVICE inline uint8_t Mxfp8ScaleFromAmaxBits(uint32_t amax_bits) {
  if (amax_bits >= 0x7F800000u) return kE8m0NanCode;
  const uint32_t exp_field = amax_bits >> 23;
  return static_cast<uint8_t>(exp_field > 8u ? exp_field - 8u : 0u);
}

// One element of a block whose scale is `scale`: E4M3(x / 2^shared_exp), with saturation; every
// element of a NaN-scaled block is 0x7F. Dividing by a power of two is exact here (the quotient is
// below 512; only quotients far below E4M3's smallest subnormal lose fp32 bits).
PSYNC_HOST_DEVICE inline uint8_t EncodeMxfp8Element(float x, uint8_t scale) {
  if (scale == kE8m0NanCode) return kE4m3NanCode;
  return EncodeE4m3(x * E8m0Reciprocal(scale));
}

// element * 2^shared_exp, exact for every finite code pair; NaN if either code is NaN.
PSYNC_HOST_DEVICE inline float DecodeMxfp8Element(uint8_t element, uint8_t scale) {
  return DecodeE4m3(element) * DecodeE8m0(scale);
}

// Number of scale bytes (blocks) for n elements: ceil(n / 32).
PSYNC_HOST_DEVICE inline int64_t Mxfp8NumBlocks(int64_t num_elements) {
  return (num_elements + kMxfp8BlockSize - 1) / kMxfp8BlockSize;
}

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COMPUTE_SCALAR_FORMATS_H_
