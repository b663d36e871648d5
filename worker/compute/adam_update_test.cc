#include "worker/compute/adam_update.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace psync {
namespace worker {
namespace {

TEST(MakeAdamConstantsTest, BiasCorrectionsAreComputedInDouble) {
  AdamParams hp;
  hp.beta1 = 0.9f;
  hp.beta2 = 0.999f;
  const AdamConstants c1 = MakeAdamConstants(hp, 1);
  EXPECT_EQ(c1.bias_correction1, static_cast<float>(1.0 - static_cast<double>(0.9f)));
  EXPECT_EQ(c1.bias_correction2, static_cast<float>(1.0 - static_cast<double>(0.999f)));
  EXPECT_EQ(c1.one_minus_beta1, c1.bias_correction1);
  const AdamConstants c3 = MakeAdamConstants(hp, 3);
  EXPECT_EQ(c3.bias_correction1,
            static_cast<float>(1.0 - std::pow(static_cast<double>(0.9f), 3.0)));
  const AdamConstants late = MakeAdamConstants(hp, 1000000);
  EXPECT_EQ(late.bias_correction1, 1.0f);
  EXPECT_EQ(late.bias_correction2, 1.0f);
}

// Every intermediate below is exact in fp32, so the results are exact.
TEST(AdamUpdateTest, HandComputedStep) {
  AdamParams hp;
  hp.lr = 0.5f;
  hp.beta1 = 0.5f;
  hp.beta2 = 0.75f;
  hp.eps = 0x1p-30f;  // Below half an ulp of denom (2): no effect after rounding.
  hp.weight_decay = 0.0f;
  float m = 0.0f;
  float v = 0.0f;
  // m' = 0.5 * 2 = 1; v' = 0.25 * 4 = 1; bc1 = 0.5, bc2 = 0.25; m_hat = 2, v_hat = 4;
  // update = 2 / (2 + eps) = 1; p' = 1 - 0.5 * 1 = 0.5.
  EXPECT_EQ(AdamUpdate(MakeAdamConstants(hp, 1), 1.0f, 2.0f, &m, &v), 0.5f);
  EXPECT_EQ(m, 1.0f);
  EXPECT_EQ(v, 1.0f);

  // Decoupled weight decay adds weight_decay * p to the update: 1 + 0.5 * 1 = 1.5.
  hp.weight_decay = 0.5f;
  m = 0.0f;
  v = 0.0f;
  EXPECT_EQ(AdamUpdate(MakeAdamConstants(hp, 1), 1.0f, 2.0f, &m, &v), 0.25f);

  // Step 2 from (m, v) = (1, 1) with g = -2: m' = 0.5 - 1 = -0.5, v' = 0.75 + 1 = 1.75,
  // bc1 = 0.75, bc2 = 0.4375: m_hat = -2/3, v_hat = 4, update = -1/3 + 0.5 * 0.25.
  hp.weight_decay = 0.5f;
  m = 1.0f;
  v = 1.0f;
  const float p = AdamUpdate(MakeAdamConstants(hp, 2), 0.25f, -2.0f, &m, &v);
  EXPECT_EQ(m, -0.5f);
  EXPECT_EQ(v, 1.75f);
  EXPECT_NEAR(p, 0.25 - 0.5 * (-1.0 / 3.0 + 0.125), 1e-7);
}

TEST(AdamUpdateTest, ZeroGradientOnlyDecays) {
  AdamParams hp;
  hp.lr = 0.01f;
  hp.weight_decay = 0.1f;
  float m = 0.0f;
  float v = 0.0f;
  const float p = AdamUpdate(MakeAdamConstants(hp, 1), 2.0f, 0.0f, &m, &v);
  EXPECT_EQ(m, 0.0f);
  EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(p, 2.0f - 0.01f * (0.1f * 2.0f));
}

TEST(AdamUpdateTest, NanGradientGivesNanParameter) {
  AdamParams hp;
  float m = 0.0f;
  float v = 0.0f;
  const float p =
      AdamUpdate(MakeAdamConstants(hp, 1), 1.0f, std::numeric_limits<float>::quiet_NaN(), &m, &v);
  EXPECT_TRUE(std::isnan(p));
  EXPECT_TRUE(std::isnan(m));
}

}  // namespace
}  // namespace worker
}  // namespace psync
