#include "worker/compute/reference.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace psync {
namespace worker {
namespace {

TEST(ReferenceAdamTest, HandComputedStep) {
  AdamParams hp;
  hp.lr = 0.5f;
  hp.beta1 = 0.5f;
  hp.beta2 = 0.75f;
  hp.eps = 0.0f;  // The reference does not validate; zero keeps the arithmetic exact.
  hp.weight_decay = 0.5f;
  // m' = 1, v' = 1, m_hat = 2, v_hat = 4, update = 2 / 2 + 0.5 * 1 = 1.5, p' = 1 - 0.75.
  const ReferenceAdamState next = ReferenceAdamUpdate(hp, 1, {1.0, 0.0, 0.0}, 2.0);
  EXPECT_EQ(next.param, 0.25);
  EXPECT_EQ(next.exp_avg, 1.0);
  EXPECT_EQ(next.exp_avg_sq, 1.0);
  // Step 2 with g = -2: m' = -0.5, v' = 1.75, bc1 = 0.75, bc2 = 0.4375.
  const ReferenceAdamState second = ReferenceAdamUpdate(hp, 2, next, -2.0);
  EXPECT_EQ(second.exp_avg, -0.5);
  EXPECT_EQ(second.exp_avg_sq, 1.75);
  EXPECT_DOUBLE_EQ(second.param, 0.25 - 0.5 * ((-0.5 / 0.75) / 2.0 + 0.5 * 0.25));
}

TEST(ReferenceFormatsTest, CodeValues) {
  EXPECT_EQ(ReferenceBf16Value(0x3F80), 1.0);
  EXPECT_EQ(ReferenceBf16Value(0x0001), std::ldexp(1.0, -133));
  EXPECT_EQ(ReferenceBf16Value(0x7F7F), std::ldexp(255.0, 120));
  EXPECT_TRUE(std::isinf(ReferenceBf16Value(0xFF80)));
  EXPECT_TRUE(std::isnan(ReferenceBf16Value(0x7FC1)));
  EXPECT_EQ(ReferenceE4m3Value(0x7E), 448.0);
  EXPECT_EQ(ReferenceE4m3Value(0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(ReferenceE4m3Value(0xB8), -1.0);
  EXPECT_TRUE(std::isnan(ReferenceE4m3Value(0xFF)));
  EXPECT_EQ(ReferenceE8m0Value(0), std::ldexp(1.0, -127));
  EXPECT_EQ(ReferenceE8m0Value(254), std::ldexp(1.0, 127));
  EXPECT_TRUE(std::isnan(ReferenceE8m0Value(0xFF)));
}

TEST(ReferenceFormatsTest, Encoders) {
  EXPECT_EQ(ReferenceEncodeBf16(1.0f), 0x3F80);
  EXPECT_EQ(ReferenceEncodeBf16(1.0f + 0x1p-8f), 0x3F80);  // Tie to even.
  EXPECT_EQ(ReferenceEncodeBf16(1.0f + 0x3p-8f), 0x3F82);  // Tie to even (up).
  EXPECT_EQ(ReferenceEncodeBf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(ReferenceEncodeE4m3(448.0), 0x7E);
  EXPECT_EQ(ReferenceEncodeE4m3(1e9), 0x7E);
  EXPECT_EQ(ReferenceEncodeE4m3(-1.0625), 0xB8);  // Tie to even.
  EXPECT_EQ(ReferenceEncodeE4m3(std::ldexp(1.0, -10)), 0x00);
  EXPECT_EQ(ReferenceEncodeE4m3(std::nan("")), 0x7F);

  const std::vector<float> values = {1.0f, -0.5f, 3.0f};
  std::vector<uint8_t> region(4);
  ASSERT_TRUE(ReferenceEncodeMxfp8(values, absl::MakeSpan(region)).ok());
  // amax 3 -> shared_exp 1 - 8 = -7 (code 120): 1 -> 2^7 (0x70), -0.5 -> -2^6 (0xE8),
  // 3 -> 384 (0x7C).
  EXPECT_EQ(region, (std::vector<uint8_t>{0x70, 0xE8, 0x7C, 120}));
}

TEST(ReferenceAdamStepAndStageTest, StagesTheRoundedParams) {
  AdamParams hp;
  std::vector<float> p = {0.1f, -0.2f, 0.3f};
  const std::vector<float> g = {0.01f, 0.02f, -0.03f};
  std::vector<float> m(3, 0.0f);
  std::vector<float> v(3, 0.0f);
  std::vector<uint8_t> staged(6);
  ASSERT_TRUE(ReferenceAdamStepAndStage(hp, 1, absl::MakeSpan(p), g, absl::MakeSpan(m),
                                        absl::MakeSpan(v), ParamDtype::kBf16,
                                        absl::MakeSpan(staged))
                  .ok());
  for (int i = 0; i < 3; ++i) {
    // At step 1 Adam moves every parameter by about lr against its gradient's sign.
    EXPECT_NEAR(p[i], (i == 0 ? 0.1 : i == 1 ? -0.2 : 0.3) - 1e-3 * (g[i] > 0 ? 1 : -1), 1e-6);
    const uint16_t code = ReferenceEncodeBf16(p[i]);
    EXPECT_EQ(staged[2 * i], code & 0xFF);
    EXPECT_EQ(staged[2 * i + 1], code >> 8);
  }
  EXPECT_FALSE(ReferenceAdamStepAndStage(hp, 0, absl::MakeSpan(p), g, absl::MakeSpan(m),
                                         absl::MakeSpan(v), ParamDtype::kBf16,
                                         absl::MakeSpan(staged))
                   .ok());
}

}  // namespace
}  // namespace worker
}  // namespace psync
