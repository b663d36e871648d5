#include "worker/compute/synthetic.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace psync {
namespace worker {
namespace {

// Pinned values: a change here changes every synthetic run, which must be deliberate.
TEST(SyntheticTest, GoldenValues) {
  EXPECT_EQ(SyntheticGradient(0, 0, 0, 0), 0x1.a14cbp-3f);
  EXPECT_EQ(SyntheticGradient(1, 2, 3, 4), -0x1.551cep-3f);
  EXPECT_EQ(SyntheticGradient(42, 1000, 7, 123456789), 0x1.bb91fcp-1f);
  EXPECT_EQ(SyntheticGradient(~0ull, 1, 0, 1), 0x1.791568p-2f);
}

TEST(SyntheticTest, StreamKeyFormEqualsTheFourArgumentForm) {
  const uint64_t key = SyntheticStreamKey(9, 10, 11);
  for (int64_t index = 0; index < 1000; ++index) {
    EXPECT_EQ(SyntheticValue(key, index), SyntheticGradient(9, 10, 11, index));
  }
}

TEST(SyntheticTest, ValuesAreInRangeOnTheGridAndRoughlyUniform) {
  constexpr int kCount = 1 << 20;
  constexpr int kBins = 16;
  std::vector<int> bins(kBins, 0);
  double sum = 0.0;
  for (int i = 0; i < kCount; ++i) {
    const float x = SyntheticGradient(5, 6, 7, i);
    ASSERT_GE(x, -1.0f);
    ASSERT_LT(x, 1.0f);
    const float scaled = x * 8388608.0f;  // Exact.
    ASSERT_EQ(scaled, std::trunc(scaled)) << x;
    sum += x;
    ++bins[static_cast<int>((x + 1.0f) * (kBins / 2))];
  }
  // Uniform on [-1, 1): sd 1/sqrt(3). Mean within 6 standard errors.
  EXPECT_LT(std::fabs(sum / kCount), 6.0 / std::sqrt(3.0 * kCount));
  // Each bin expects kCount / kBins = 65536, sd ~ 248: allow 6 sd.
  for (int b = 0; b < kBins; ++b) EXPECT_NEAR(bins[b], kCount / kBins, 1500) << b;
}

TEST(SyntheticTest, EveryArgumentChangesTheValue) {
  int same_seed = 0, same_step = 0, same_rank = 0, same_index = 0;
  constexpr int kTrials = 10000;
  for (int i = 0; i < kTrials; ++i) {
    const float x = SyntheticGradient(1, 2, 3, i);
    same_seed += x == SyntheticGradient(2, 2, 3, i);
    same_step += x == SyntheticGradient(1, 3, 3, i);
    same_rank += x == SyntheticGradient(1, 2, 4, i);
    same_index += x == SyntheticGradient(1, 2, 3, i + kTrials);
  }
  // Two independent values on a 2^24 grid coincide with probability 2^-24.
  EXPECT_LE(same_seed, 2);
  EXPECT_LE(same_step, 2);
  EXPECT_LE(same_rank, 2);
  EXPECT_LE(same_index, 2);
}

}  // namespace
}  // namespace worker
}  // namespace psync
