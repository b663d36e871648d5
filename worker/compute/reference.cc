#include "worker/compute/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "worker/compute/backend_checks.h"
#include "worker/compute/scalar_formats.h"

namespace psync {
namespace worker {
namespace {

// Chooses between two adjacent codes `low` (nearer zero) and `low + 1` for |x|.
template <typename Code>
Code NearestOfTwo(double ax, Code low, double low_value, double high_value) {
  const double to_low = ax - low_value;
  const double to_high = high_value - ax;
  if (to_low < to_high) return low;
  if (to_high < to_low) return static_cast<Code>(low + 1);
  return (low & 1) == 0 ? low : static_cast<Code>(low + 1);
}

}  // namespace

ReferenceAdamState ReferenceAdamUpdate(const AdamParams& hp, int64_t step,
                                       const ReferenceAdamState& state, double grad) {
  const double beta1 = hp.beta1;
  const double beta2 = hp.beta2;
  const double t = static_cast<double>(step);
  ReferenceAdamState next;
  next.exp_avg = beta1 * state.exp_avg + (1.0 - beta1) * grad;
  next.exp_avg_sq = beta2 * state.exp_avg_sq + (1.0 - beta2) * grad * grad;
  const double m_hat = next.exp_avg / (1.0 - std::pow(beta1, t));
  const double v_hat = next.exp_avg_sq / (1.0 - std::pow(beta2, t));
  const double update = m_hat / (std::sqrt(v_hat) + static_cast<double>(hp.eps)) +
                        static_cast<double>(hp.weight_decay) * state.param;
  next.param = state.param - static_cast<double>(hp.lr) * update;
  return next;
}

double ReferenceBf16Value(uint16_t code) {
  const int exponent = (code >> 7) & 0xFF;
  const int mantissa = code & 0x7F;
  const double sign = (code & 0x8000) != 0 ? -1.0 : 1.0;
  if (exponent == 0xFF) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, -133);  // mantissa * 2^(1 - 127 - 7).
  return sign * std::ldexp(128 + mantissa, exponent - 134);
}

double ReferenceE4m3Value(uint8_t code) {
  if ((code & 0x7F) == 0x7F) return std::numeric_limits<double>::quiet_NaN();
  const int exponent = (code >> 3) & 0xF;
  const int mantissa = code & 0x7;
  const double sign = (code & 0x80) != 0 ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -9);  // mantissa * 2^(1 - 7 - 3).
  return sign * std::ldexp(8 + mantissa, exponent - 10);
}

double ReferenceE8m0Value(uint8_t code) {
  if (code == 0xFF) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, code - 127);
}

uint16_t ReferenceEncodeBf16(float x) {
  const uint32_t bits = FloatToBits(x);
  if (std::isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x0040);
  if (std::isinf(x)) return static_cast<uint16_t>(bits >> 16);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  // The bf16 code whose magnitude is |x| truncated, and the next one up. The code above the
  // largest finite value is Inf; for rounding it stands for 2^128 (the next binade's start).
  const uint16_t low = static_cast<uint16_t>((bits >> 16) & 0x7FFF);
  const double low_value = ReferenceBf16Value(low);
  const double high_value =
      low + 1 == 0x7F80 ? std::ldexp(1.0, 128) : ReferenceBf16Value(static_cast<uint16_t>(low + 1));
  return static_cast<uint16_t>(
      sign | NearestOfTwo<uint16_t>(std::fabs(static_cast<double>(x)), low, low_value, high_value));
}

uint8_t ReferenceEncodeE4m3(double q) {
  const uint8_t sign = std::signbit(q) ? 0x80 : 0x00;
  if (std::isnan(q)) return static_cast<uint8_t>(sign | 0x7F);
  const double a = std::fabs(q);
  if (a >= 448.0) return static_cast<uint8_t>(sign | 0x7E);
  // Codes 0x00..0x7E are increasing in value: find the last one <= a, then pick the nearer
  // of it and its successor.
  uint8_t low = 0;
  while (low < 0x7E && ReferenceE4m3Value(static_cast<uint8_t>(low + 1)) <= a) ++low;
  if (low == 0x7E) return static_cast<uint8_t>(sign | low);
  return static_cast<uint8_t>(
      sign | NearestOfTwo<uint8_t>(a, low, ReferenceE4m3Value(low),
                                   ReferenceE4m3Value(static_cast<uint8_t>(low + 1))));
}

absl::Status ReferenceEncodeMxfp8(absl::Span<const float> values, absl::Span<uint8_t> out) {
  const Mxfp8Layout layout{static_cast<int64_t>(values.size())};
  if (static_cast<int64_t>(out.size()) != layout.total_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("ReferenceEncodeMxfp8: out has ", out.size(),
                                                   " bytes, expected ", layout.total_bytes()));
  }
  for (int64_t block = 0; block < layout.num_blocks(); ++block) {
    const int64_t begin = block * kMxfp8BlockSize;
    const int64_t end = std::min<int64_t>(begin + kMxfp8BlockSize, layout.num_elements);
    bool special = false;
    double amax = 0.0;
    for (int64_t i = begin; i < end; ++i) {
      if (!std::isfinite(values[i])) special = true;
      amax = std::max(amax, std::fabs(static_cast<double>(values[i])));
    }
    uint8_t* scale = &out[layout.scales_offset() + block];
    if (special) {
      *scale = 0xFF;
      for (int64_t i = begin; i < end; ++i) out[layout.elements_offset() + i] = 0x7F;
      continue;
    }
    // shared_exp = floor(log2(amax)) - 8, clamped to [-127, 127]; floor(log2(0)) = -inf.
    int shared_exp = -127;
    if (amax > 0.0) {
      int exponent;
      std::frexp(amax, &exponent);  // amax = f * 2^exponent, f in [0.5, 1).
      shared_exp = std::max(exponent - 1 - 8, -127);
    }
    *scale = static_cast<uint8_t>(shared_exp + 127);
    for (int64_t i = begin; i < end; ++i) {
      out[layout.elements_offset() + i] =
          ReferenceEncodeE4m3(std::ldexp(static_cast<double>(values[i]), -shared_exp));
    }
  }
  return absl::OkStatus();
}

absl::Status ReferenceAdamStepAndStage(const AdamParams& hp, int64_t step,
                                       absl::Span<float> main_param, absl::Span<const float> grad,
                                       absl::Span<float> exp_avg, absl::Span<float> exp_avg_sq,
                                       ParamDtype dtype, absl::Span<uint8_t> staged) {
  if (absl::Status s =
          CheckAdamStepArgs(hp, step, main_param, grad, exp_avg, exp_avg_sq, dtype, staged);
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < main_param.size(); ++i) {
    const ReferenceAdamState next =
        ReferenceAdamUpdate(hp, step, {main_param[i], exp_avg[i], exp_avg_sq[i]}, grad[i]);
    main_param[i] = static_cast<float>(next.param);
    exp_avg[i] = static_cast<float>(next.exp_avg);
    exp_avg_sq[i] = static_cast<float>(next.exp_avg_sq);
  }
  if (dtype == ParamDtype::kMxfp8) return ReferenceEncodeMxfp8(main_param, staged);
  for (size_t i = 0; i < main_param.size(); ++i) {
    const uint16_t code = ReferenceEncodeBf16(main_param[i]);
    staged[2 * i] = static_cast<uint8_t>(code & 0xFF);
    staged[2 * i + 1] = static_cast<uint8_t>(code >> 8);
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace psync
