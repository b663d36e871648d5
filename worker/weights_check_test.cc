#include "worker/weights_check.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace psync {
namespace worker {
namespace {

TEST(WeightsChecksumTest, IsFnv1aOverTheLittleEndianBytes) {
  EXPECT_EQ(WeightsChecksum({}), 0xcbf29ce484222325ull);
  // 1.0f = 0x3F800000: bytes 00 00 80 3F.
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t byte : {0x00, 0x00, 0x80, 0x3F}) {
    h ^= byte;
    h *= 0x100000001b3ull;
  }
  const std::vector<float> one = {1.0f};
  EXPECT_EQ(WeightsChecksum(one), h);
}

TEST(WeightsChecksumTest, DependsOnValuesAndOrder) {
  const std::vector<float> a = {1.0f, 2.0f};
  const std::vector<float> b = {2.0f, 1.0f};
  const std::vector<float> zeros = {0.0f, 0.0f};
  EXPECT_EQ(WeightsChecksum(a), WeightsChecksum(std::vector<float>{1.0f, 2.0f}));
  EXPECT_NE(WeightsChecksum(a), WeightsChecksum(b));
  EXPECT_NE(WeightsChecksum(a), WeightsChecksum(zeros));
}

TEST(CompareWeightsTest, EqualWeightsAreOkAndSignedZerosAreEqual) {
  const std::vector<float> a = {0.5f, -0.0f, 3.0f};
  const std::vector<float> e = {0.5f, 0.0f, 3.0f};
  const WeightDiff d = CompareWeights(a, e, 0.0f);
  EXPECT_TRUE(d.ok());
  EXPECT_EQ(d.elements, 3);
  EXPECT_EQ(d.first_mismatch, -1);
}

TEST(CompareWeightsTest, CountsZeroedNonFiniteAndTheLargestError) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> actual = {0.0f, 0.0f, nan, inf, 1.25f, 2.0f, 0.0f, 7.0f};
  const std::vector<float> expect = {0.5f, -2.0f, 1.0f, 1.0f, 1.0f, 2.0f, 0.0f, 7.0f};
  const WeightDiff d = CompareWeights(actual, expect, 0.0f);
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(d.elements, 8);
  EXPECT_EQ(d.mismatched, 5);
  EXPECT_EQ(d.zeroed, 2);
  EXPECT_EQ(d.actual_zeros, 3);  // the last zero was expected
  EXPECT_EQ(d.nonfinite, 2);
  EXPECT_DOUBLE_EQ(d.max_abs_error, 2.0);
  EXPECT_EQ(d.first_mismatch, 0);
  EXPECT_DOUBLE_EQ(d.zeroed_fraction(), 0.25);
  EXPECT_NE(d.Describe().find("25.0% zeroed"), std::string::npos) << d.Describe();
}

TEST(CompareWeightsTest, ToleranceAcceptsSmallErrorsButNeverNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> actual = {1.001f, nan};
  const std::vector<float> expect = {1.0f, 1.0f};
  const WeightDiff d = CompareWeights(actual, expect, 0.01f);
  EXPECT_EQ(d.mismatched, 1);
  EXPECT_EQ(d.first_mismatch, 1);
}

}  // namespace
}  // namespace worker
}  // namespace psync
