#include "worker/compute/formats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/compute/reference.h"
#include "worker/compute/scalar_formats.h"

namespace psync {
namespace worker {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNan = std::numeric_limits<float>::quiet_NaN();

// ---- bf16
// ----------------------------------------------------------------------------------------

TEST(Bf16Test, ExactValues) {
  EXPECT_EQ(EncodeBf16(1.0f), 0x3F80);
  EXPECT_EQ(EncodeBf16(-2.0f), 0xC000);
  EXPECT_EQ(EncodeBf16(0.0f), 0x0000);
  EXPECT_EQ(EncodeBf16(-0.0f), 0x8000);
  EXPECT_EQ(EncodeBf16(kInf), 0x7F80);
  EXPECT_EQ(EncodeBf16(-kInf), 0xFF80);
  EXPECT_EQ(DecodeBf16(0x3F80), 1.0f);
  EXPECT_EQ(DecodeBf16(0xC000), -2.0f);
  EXPECT_EQ(FloatToBits(DecodeBf16(0x8000)), 0x80000000u);
}

TEST(Bf16Test, RoundsToNearestEvenOnTies) {
  // 1 + 2^-8 lies exactly between 0x3F80 (1) and 0x3F81 (1 + 2^-7): the even code wins.
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x3F808000)), 0x3F80);
  // Between 0x3F81 (odd) and 0x3F82: rounds up to the even code.
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x3F818000)), 0x3F82);
  EXPECT_EQ(EncodeBf16(BitsToFloat(0xBF818000)), 0xBF82);
  // Off the tie by one fp32 ulp, nearest wins.
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x3F808001)), 0x3F81);
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x3F807FFF)), 0x3F80);
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x3F817FFF)), 0x3F81);
}

TEST(Bf16Test, OverflowRoundsToInfLikeIeee) {
  // FLT_MAX is above the midpoint between bf16's max (0x7F7F) and 2^128: rounds to Inf.
  EXPECT_EQ(EncodeBf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(EncodeBf16(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x7F7F7FFF)), 0x7F7F);
}

TEST(Bf16Test, NanStaysQuietNanWithSignAndTopPayload) {
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x7FC00000)), 0x7FC0);
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x7F800001)), 0x7FC0);  // Signalling, low payload: still NaN.
  EXPECT_EQ(EncodeBf16(BitsToFloat(0xFFA00000)), 0xFFE0);
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x7F8A0000)), 0x7FCA);
  EXPECT_TRUE(std::isnan(DecodeBf16(EncodeBf16(kNan))));
}

TEST(Bf16Test, SubnormalsRoundLikeOtherValues) {
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x00010000)), 0x0001);  // Exactly representable.
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x00000001)), 0x0000);
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x00008000)), 0x0000);  // Tie, even.
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x00018000)), 0x0002);  // Tie, up to even.
  EXPECT_EQ(EncodeBf16(BitsToFloat(0x007FFFFF)), 0x0080);  // Carries into the smallest normal.
}

TEST(Bf16Test, EveryCodeRoundTripsExactly) {
  for (uint32_t code = 0; code <= 0xFFFF; ++code) {
    const float value = DecodeBf16(static_cast<uint16_t>(code));
    if ((code & 0x7FFF) > 0x7F80) {
      EXPECT_TRUE(std::isnan(value)) << std::hex << code;
      EXPECT_EQ(EncodeBf16(value), code | 0x0040) << std::hex << code;
    } else {
      EXPECT_EQ(EncodeBf16(value), code) << std::hex << code;
      EXPECT_EQ(static_cast<double>(value), ReferenceBf16Value(static_cast<uint16_t>(code)));
    }
  }
}

TEST(Bf16Test, MatchesNearestValueReferenceOnRandomBitPatterns) {
  std::mt19937 rng(20251130);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = rng();
    ASSERT_EQ(EncodeBf16(BitsToFloat(bits)), ReferenceEncodeBf16(BitsToFloat(bits)))
        << std::hex << bits;
  }
}

TEST(Bf16Test, ArraysAreLittleEndianCodes) {
  const std::vector<float> values = {1.0f, -2.0f, BitsToFloat(0x3F818000)};
  std::vector<uint8_t> bytes(6);
  ASSERT_TRUE(EncodeBf16(values, absl::MakeSpan(bytes)).ok());
  EXPECT_THAT(bytes, ::testing::ElementsAre(0x80, 0x3F, 0x00, 0xC0, 0x82, 0x3F));
  std::vector<float> decoded(3);
  ASSERT_TRUE(DecodeBf16(bytes, absl::MakeSpan(decoded)).ok());
  EXPECT_THAT(decoded, ::testing::ElementsAre(1.0f, -2.0f, BitsToFloat(0x3F820000)));
}

TEST(Bf16Test, WrongSizesAreRejectedAndNothingIsWritten) {
  const std::vector<float> values = {1.0f, 2.0f};
  std::vector<uint8_t> bytes(3, 0xAB);
  EXPECT_EQ(EncodeBf16(values, absl::MakeSpan(bytes)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bytes, ::testing::Each(0xAB));
  std::vector<float> decoded(1, 7.0f);
  EXPECT_EQ(DecodeBf16(bytes, absl::MakeSpan(decoded)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded, ::testing::Each(7.0f));
}

// ---- E4M3
// ----------------------------------------------------------------------------------------

TEST(E4m3Test, DecodesEveryCodeLikeTheReference) {
  for (int code = 0; code < 256; ++code) {
    const float value = DecodeE4m3(static_cast<uint8_t>(code));
    if ((code & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(value)) << code;
    } else {
      EXPECT_EQ(static_cast<double>(value), ReferenceE4m3Value(static_cast<uint8_t>(code))) << code;
    }
  }
  EXPECT_EQ(DecodeE4m3(0x7E), 448.0f);
  EXPECT_EQ(DecodeE4m3(0xFE), -448.0f);
  EXPECT_EQ(DecodeE4m3(0x38), 1.0f);
  EXPECT_EQ(DecodeE4m3(0x01), 0x1p-9f);
  EXPECT_EQ(DecodeE4m3(0x08), 0x1p-6f);
  EXPECT_EQ(FloatToBits(DecodeE4m3(0x80)), 0x80000000u);
}

TEST(E4m3Test, EveryFiniteCodeRoundTripsExactly) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;
    EXPECT_EQ(EncodeE4m3(DecodeE4m3(static_cast<uint8_t>(code))), code) << code;
  }
}

TEST(E4m3Test, SaturatesNanAndTies) {
  EXPECT_EQ(EncodeE4m3(448.0f), 0x7E);
  EXPECT_EQ(EncodeE4m3(447.0f), 0x7E);  // Nearest.
  EXPECT_EQ(EncodeE4m3(464.0f), 0x7E);  // Would round past 448 without saturation.
  EXPECT_EQ(EncodeE4m3(1e30f), 0x7E);
  EXPECT_EQ(EncodeE4m3(-1e30f), 0xFE);
  EXPECT_EQ(EncodeE4m3(kInf), 0x7E);
  EXPECT_EQ(EncodeE4m3(-kInf), 0xFE);
  EXPECT_EQ(EncodeE4m3(kNan), 0x7F);
  EXPECT_EQ(EncodeE4m3(-kNan), 0xFF);
  EXPECT_EQ(EncodeE4m3(0x1p-10f), 0x00);       // Tie between 0 and 2^-9: even (0).
  EXPECT_EQ(EncodeE4m3(3 * 0x1p-10f), 0x02);   // Tie between 1 and 2 subnormal steps: 2.
  EXPECT_EQ(EncodeE4m3(1.0625f), 0x38);        // Tie between 1 and 1.125: even (1).
  EXPECT_EQ(EncodeE4m3(1.1875f), 0x3A);        // Tie between 1.125 and 1.25: even (1.25).
  EXPECT_EQ(EncodeE4m3(15 * 0x1p-10f), 0x08);  // Tie between 7 * 2^-9 and 2^-6: the normal 0x08.
  EXPECT_EQ(EncodeE4m3(BitsToFloat(0x00000001)), 0x00);  // fp32 subnormal.
  EXPECT_EQ(EncodeE4m3(-0.0f), 0x80);
}

TEST(E4m3Test, MatchesNearestValueReferenceAroundEveryCode) {
  // For each pair of adjacent non-negative codes: both codes, the midpoint (a tie) and the
  // fp32 neighbours of the midpoint, in both signs.
  for (int code = 0; code < 0x7E; ++code) {
    const float low = DecodeE4m3(static_cast<uint8_t>(code));
    const float high = DecodeE4m3(static_cast<uint8_t>(code + 1));
    const float mid = 0.5f * (low + high);  // Exact: both have 4 significant bits.
    for (float x : {low, high, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      EXPECT_EQ(EncodeE4m3(x), ReferenceEncodeE4m3(x)) << x;
      EXPECT_EQ(EncodeE4m3(-x), ReferenceEncodeE4m3(-x)) << -x;
    }
  }
}

TEST(E4m3Test, MatchesNearestValueReferenceOnRandomMagnitudes) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> log2_magnitude(-24.0f, 10.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::exp2(log2_magnitude(rng)) * ((rng() & 1) != 0 ? -1.0f : 1.0f);
    ASSERT_EQ(EncodeE4m3(x), ReferenceEncodeE4m3(x)) << x;
  }
}

// ---- E8M0 and scale choice
// -----------------------------------------------------------------------

TEST(E8m0Test, DecodesPowersOfTwoAndNan) {
  EXPECT_EQ(DecodeE8m0(127), 1.0f);
  EXPECT_EQ(DecodeE8m0(0), 0x1p-127f);
  EXPECT_EQ(DecodeE8m0(1), 0x1p-126f);
  EXPECT_EQ(DecodeE8m0(254), 0x1p127f);
  EXPECT_TRUE(std::isnan(DecodeE8m0(0xFF)));
  for (int code = 0; code < 255; ++code) {
    EXPECT_EQ(E8m0Reciprocal(static_cast<uint8_t>(code)) * DecodeE8m0(static_cast<uint8_t>(code)),
              1.0f)
        << code;
  }
}

TEST(Mxfp8ScaleTest, FollowsTheSpecFormula) {
  // shared_exp = floor(log2(amax)) - 8, biased by 127.
  EXPECT_EQ(Mxfp8ScaleFromAmaxBits(AbsBits(1.0f)), 127 - 8);
  EXPECT_EQ(Mxfp8ScaleFromAmaxBits(AbsBits(1.999f)), 127 - 8);
  EXPECT_EQ(Mxfp8ScaleFromAmaxBits(AbsBits(448.0f)), 127);
  EXPECT_EQ(Mxfp8ScaleFromAmaxBits(AbsBits(511.0f)), 127);
  EXPECT_EQ(Mxfp8ScaleFromAmaxBits(AbsBits(512.0f)), 128);
  EXPECT_EQ(Mxfp8ScaleFromAmaxBits(AbsBits(std::numeric_limits<float>::max())), 246);
  // Clamped at 2^-127 (code 0): zero, subnormals and anything below 2^-118.
  EXPECT_EQ(Mxfp8ScaleFromAmaxBits(AbsBits(0x1p-118f)), 1);
  EXPECT_EQ(Mxfp8ScaleFromAmaxBits(AbsBits(0x1p-119f)), 0);
  EXPECT_EQ(Mxfp8ScaleFromAmaxBits(AbsBits(0x1p-140f)), 0);
  EXPECT_EQ(Mxfp8ScaleFromAmaxBits(0), 0);
  EXPECT_EQ(Mxfp8ScaleFromAmaxBits(AbsBits(kInf)), 0xFF);
  EXPECT_EQ(Mxfp8ScaleFromAmaxBits(AbsBits(-kNan)), 0xFF);
}

// ---- MXFP8 regions
// -------------------------------------------------------------------------------

std::vector<uint8_t> Encode(const std::vector<float>& values) {
  std::vector<uint8_t> out(Mxfp8Layout{static_cast<int64_t>(values.size())}.total_bytes());
  EXPECT_TRUE(EncodeMxfp8(values, absl::MakeSpan(out)).ok());
  return out;
}

std::vector<float> Decode(const std::vector<uint8_t>& region, size_t n) {
  std::vector<float> values(n);
  EXPECT_TRUE(DecodeMxfp8(region, absl::MakeSpan(values)).ok());
  return values;
}

// Random values whose magnitude varies per block over many binades, with a sprinkling of zeros.
std::vector<float> RandomBlocks(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> block_log2(-60.0f, 60.0f);
  std::uniform_real_distribution<float> element_log2(-14.0f, 0.0f);
  std::vector<float> values(n);
  float block_scale = 1.0f;
  for (size_t i = 0; i < n; ++i) {
    if (i % kMxfp8BlockSize == 0) block_scale = std::exp2(block_log2(rng));
    const float sign = (rng() & 1) != 0 ? -1.0f : 1.0f;
    values[i] = rng() % 64 == 0 ? 0.0f : sign * block_scale * std::exp2(element_log2(rng));
  }
  return values;
}

TEST(Mxfp8Test, LayoutIsElementsThenScales) {
  EXPECT_EQ(Mxfp8Layout{0}.total_bytes(), 0);
  EXPECT_EQ(Mxfp8Layout{1}.total_bytes(), 2);
  EXPECT_EQ(Mxfp8Layout{32}.total_bytes(), 33);
  EXPECT_EQ(Mxfp8Layout{33}.total_bytes(), 35);
  EXPECT_EQ(Mxfp8Layout{64}.num_blocks(), 2);
  EXPECT_EQ(Mxfp8Layout{64}.scales_offset(), 64);
  EXPECT_EQ(StagedBytes(ParamDtype::kMxfp8, 1000), 1000 + 32);
  EXPECT_EQ(StagedBytes(ParamDtype::kBf16, 1000), 2000);

  std::vector<float> values(40, 1.0f);
  values[33] = 2.0f;
  const std::vector<uint8_t> region = Encode(values);
  ASSERT_EQ(region.size(), 42u);
  // Block 0: amax 1 -> shared_exp -8 (code 119 = 0x77); 1 / 2^-8 = 2^8 -> E4M3 0x78.
  // Block 1 (8 elements): amax 2 -> shared_exp -7 (0x78); 1 -> 2^7 = 0x70, 2 -> 2^8 = 0x78.
  for (int i = 0; i < 32; ++i) EXPECT_EQ(region[i], 0x78) << i;
  EXPECT_EQ(region[32], 0x70);
  EXPECT_EQ(region[33], 0x78);
  for (int i = 34; i < 40; ++i) EXPECT_EQ(region[i], 0x70) << i;
  EXPECT_EQ(region[40], 0x77);
  EXPECT_EQ(region[41], 0x78);
  EXPECT_EQ(Decode(region, values.size()), values);
}

TEST(Mxfp8Test, MatchesTheReferenceEncoderExactly) {
  for (size_t n : {1u, 31u, 32u, 33u, 1000u, 32768u + 17u}) {
    const std::vector<float> values = RandomBlocks(n, static_cast<uint32_t>(n));
    std::vector<uint8_t> expected(Mxfp8Layout{static_cast<int64_t>(n)}.total_bytes());
    ASSERT_TRUE(ReferenceEncodeMxfp8(values, absl::MakeSpan(expected)).ok());
    EXPECT_EQ(Encode(values), expected) << "n = " << n;
  }
}

// Round-trip error bound. Let A be the block's max |x| and X = 2^shared_exp its scale, so that
// 2^8 <= A / X < 2^9. For an element x with q = |x| / X:
//   - q >= 448 (only possible near A): it saturates to exactly 448 X, so the error is
//     |x| - 448 X <= A - 448 X < A - 448 A / 512 = A / 8.
//   - 2^-6 <= q < 448 (E4M3 normal): round-to-nearest with 3 mantissa bits, so the error is at
//     most half an ulp, 2^(floor(log2 q) - 4) X <= 2^-4 |x|; and since q < 2^9, that is at most
//     2^4 X <= 2^-4 A.
//   - q < 2^-6 (E4M3 subnormal): the error is at most half the subnormal step, 2^-10 X.
// So every element is within max(2^-4 |x|, 2^-10 X) unless it saturated, and within 2^-3 A always.
TEST(Mxfp8Test, RoundTripErrorIsWithinTheDerivedBound) {
  const std::vector<float> values = RandomBlocks(64 * 1024 + 5, 99);
  const std::vector<uint8_t> region = Encode(values);
  const std::vector<float> decoded = Decode(region, values.size());
  const Mxfp8Layout layout{static_cast<int64_t>(values.size())};
  int saturated = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t block = i / kMxfp8BlockSize;
    const double scale = ReferenceE8m0Value(region[layout.scales_offset() + block]);
    double amax = 0.0;
    for (int64_t j = block * kMxfp8BlockSize;
         j < std::min<int64_t>((block + 1) * kMxfp8BlockSize, layout.num_elements); ++j) {
      amax = std::max(amax, std::fabs(static_cast<double>(values[j])));
    }
    const double x = values[i];
    const double error = std::fabs(static_cast<double>(decoded[i]) - x);
    ASSERT_LE(error, amax / 8) << i;
    if (std::fabs(x) >= 448 * scale) {
      ++saturated;
      ASSERT_EQ(static_cast<double>(decoded[i]), std::copysign(448 * scale, x)) << i;
    } else {
      ASSERT_LE(error, std::max(std::fabs(x) / 16, scale / 1024)) << i;
    }
  }
  EXPECT_GT(saturated, 0);  // The data does exercise the saturating case.
}

TEST(Mxfp8Test, AllZeroBlockHasScaleZeroAndKeepsSigns) {
  std::vector<float> values(32, 0.0f);
  values[3] = -0.0f;
  const std::vector<uint8_t> region = Encode(values);
  EXPECT_EQ(region[32], 0x00);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(region[i], i == 3 ? 0x80 : 0x00) << i;
  const std::vector<float> decoded = Decode(region, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(FloatToBits(decoded[i]), FloatToBits(values[i])) << i;
}

TEST(Mxfp8Test, SubnormalInputs) {
  // A block of fp32 subnormals gets the clamped scale 2^-127; elements are x * 2^127 in E4M3.
  const std::vector<float> values = {
      0x1p-127f, -0x1p-130f, 3 * 0x1p-137f, 0x1p-140f, BitsToFloat(0x00000001), 0x1.8p-126f};
  const std::vector<uint8_t> region = Encode(values);
  EXPECT_EQ(region[6], 0x00);
  const std::vector<float> decoded = Decode(region, values.size());
  EXPECT_EQ(decoded[0], 0x1p-127f);   // Exactly 1.0 * 2^-127.
  EXPECT_EQ(decoded[1], -0x1p-130f);  // Exact.
  EXPECT_EQ(decoded[2], 0x1p-135f);   // 3 * 2^-10 ties to 2 * 2^-9, times 2^-127.
  EXPECT_EQ(decoded[3], 0.0f);        // Below half the smallest step: zero.
  EXPECT_EQ(decoded[4], 0.0f);
  EXPECT_EQ(decoded[5], 0x1.8p-126f);  // Normal, exact.
  // A subnormal next to a normal amax loses everything.
  const std::vector<float> mixed = {1.0f, 0x1p-127f};
  EXPECT_EQ(Decode(Encode(mixed), 2), (std::vector<float>{1.0f, 0.0f}));
}

TEST(Mxfp8Test, ValuesAtTheE4m3MaximumAreExact) {
  for (float unit : {1.0f, 0x1p-20f, 0x1p5f}) {
    const std::vector<float> values = {448 * unit, -448 * unit, unit, 0.5f * unit};
    const std::vector<uint8_t> region = Encode(values);
    EXPECT_EQ(region[0], 0x7E);
    EXPECT_EQ(region[1], 0xFE);
    EXPECT_EQ(Decode(region, values.size()), values) << unit;
  }
}

TEST(Mxfp8Test, ValuesAbove448TimesTheScaleSaturate) {
  // amax 500 -> floor(log2) = 8 -> scale 2^0; 480 and 500 exceed 448 and saturate.
  const std::vector<float> values = {500.0f, -480.0f, 448.0f, 100.0f};
  const std::vector<uint8_t> region = Encode(values);
  EXPECT_EQ(region[4], 127);
  EXPECT_EQ(Decode(region, values.size()),
            (std::vector<float>{448.0f, -448.0f, 448.0f, 96.0f}));  // 100 -> 96 (nearest).
}

TEST(Mxfp8Test, NanOrInfPoisonsExactlyItsBlock) {
  for (float special : {kNan, -kNan, kInf, -kInf}) {
    std::vector<float> values = RandomBlocks(3 * 32 + 7, 5);
    const std::vector<uint8_t> clean = Encode(values);
    values[32 + 9] = special;  // Block 1.
    values[96 + 2] = special;  // The partial tail block.
    const std::vector<uint8_t> region = Encode(values);
    const Mxfp8Layout layout{static_cast<int64_t>(values.size())};
    EXPECT_EQ(region[layout.scales_offset() + 0], clean[layout.scales_offset() + 0]);
    EXPECT_EQ(region[layout.scales_offset() + 1], 0xFF);
    EXPECT_EQ(region[layout.scales_offset() + 2], clean[layout.scales_offset() + 2]);
    EXPECT_EQ(region[layout.scales_offset() + 3], 0xFF);
    const std::vector<float> decoded = Decode(region, values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const bool poisoned = (i >= 32 && i < 64) || i >= 96;
      if (poisoned) {
        EXPECT_EQ(region[i], 0x7F) << i;
        EXPECT_TRUE(std::isnan(decoded[i])) << i;
      } else {
        EXPECT_EQ(region[i], clean[i]) << i;
        EXPECT_FALSE(std::isnan(decoded[i])) << i;
      }
    }
  }
}

TEST(Mxfp8Test, WrongSizesAreRejectedAndNothingIsWritten) {
  const std::vector<float> values(33, 1.0f);
  std::vector<uint8_t> region(34, 0xAB);  // Needs 35.
  EXPECT_EQ(EncodeMxfp8(values, absl::MakeSpan(region)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(region, ::testing::Each(0xAB));
  std::vector<float> decoded(33, 7.0f);
  EXPECT_EQ(DecodeMxfp8(region, absl::MakeSpan(decoded)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded, ::testing::Each(7.0f));
}

TEST(StagedTest, DispatchesOnDtype) {
  const std::vector<float> values = RandomBlocks(100, 3);
  for (ParamDtype dtype : {ParamDtype::kBf16, ParamDtype::kMxfp8}) {
    std::vector<uint8_t> region(StagedBytes(dtype, values.size()));
    ASSERT_TRUE(EncodeStaged(dtype, values, absl::MakeSpan(region)).ok());
    std::vector<uint8_t> direct(region.size());
    ASSERT_TRUE((dtype == ParamDtype::kBf16 ? EncodeBf16(values, absl::MakeSpan(direct))
                                            : EncodeMxfp8(values, absl::MakeSpan(direct)))
                    .ok());
    EXPECT_EQ(region, direct);
    std::vector<float> decoded(values.size());
    ASSERT_TRUE(DecodeStaged(dtype, region, absl::MakeSpan(decoded)).ok());
    std::vector<float> decoded_direct(values.size());
    ASSERT_TRUE((dtype == ParamDtype::kBf16 ? DecodeBf16(region, absl::MakeSpan(decoded_direct))
                                            : DecodeMxfp8(region, absl::MakeSpan(decoded_direct)))
                    .ok());
    EXPECT_EQ(decoded, decoded_direct);
  }
}

TEST(StagedTest, DtypeNames) {
  EXPECT_EQ(ParamDtypeName(ParamDtype::kBf16), "bf16");
  EXPECT_EQ(ParamDtypeName(ParamDtype::kMxfp8), "mxfp8");
  EXPECT_EQ(*ParseParamDtype("mxfp8"), ParamDtype::kMxfp8);
  EXPECT_EQ(*ParseParamDtype("bf16"), ParamDtype::kBf16);
  EXPECT_EQ(ParseParamDtype("fp8").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace worker
}  // namespace psync
