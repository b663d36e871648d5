#include "worker/synthetic_model.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/scalar_formats.h"
#include "worker/compute/synthetic.h"

namespace psync {
namespace worker {
namespace {

TEST(ExactGradientTest, IsAMultipleOfTheGridInMinusOneToOne) {
  for (int rank = 0; rank < 8; ++rank) {
    for (int64_t e = 0; e < 2000; ++e) {
      const float g = ExactGradient(7, 3, rank, 1, ParamKind::kExpert, e, 2000);
      ASSERT_LE(std::fabs(g), 1.0f);
      const float units = g * 1024.0f;
      ASSERT_EQ(units, std::nearbyint(units)) << "element " << e;
    }
  }
}

TEST(ExactGradientTest, IsTheSyntheticGradientRoundedToTheGrid) {
  for (int64_t e = 0; e < 500; ++e) {
    const float raw = SyntheticGradient(3, 5, 2, GradientIndex(2, ParamKind::kDense, e));
    const float g = ExactGradient(3, 5, 2, 2, ParamKind::kDense, e, 500);
    EXPECT_LE(std::fabs(g - raw), 0.5f / 1024.0f);
  }
}

TEST(ExactGradientTest, PaddingIsZeroAndStreamsDiffer) {
  EXPECT_EQ(ExactGradient(1, 0, 0, 0, ParamKind::kDense, 100, 100), 0.0f);
  int same = 0;
  for (int64_t e = 0; e < 256; ++e) {
    same += ExactGradient(1, 0, 0, 0, ParamKind::kDense, e, 256) ==
            ExactGradient(1, 0, 0, 0, ParamKind::kExpert, e, 256);
  }
  EXPECT_LT(same, 16);  // chunk and kind select different streams
}

TEST(ExactGradientTest, FillMatchesTheScalarFunction) {
  std::vector<float> out(300);
  FillExactGradients(9, 4, 1, 3, ParamKind::kExpert, 50, 320, absl::MakeSpan(out));
  for (int64_t i = 0; i < 300; ++i) {
    EXPECT_EQ(FloatToBits(out[i]),
              FloatToBits(ExactGradient(9, 4, 1, 3, ParamKind::kExpert, 50 + i, 320)))
        << i;
  }
}

// The property the whole verification rests on: the fp32 sum over ranks is the same in any order.
TEST(ExactGradientTest, SumsOverRanksAreExactInAnyOrder) {
  constexpr int kRanks = 64;
  for (int64_t e = 0; e < 4096; ++e) {
    float g[kRanks];
    double exact = 0;
    for (int r = 0; r < kRanks; ++r) {
      g[r] = ExactGradient(11, 2, r, 0, ParamKind::kDense, e, 4096);
      exact += g[r];
    }
    float forward = 0, backward = 0;
    for (int r = 0; r < kRanks; ++r) forward += g[r];
    for (int r = kRanks - 1; r >= 0; --r) backward += g[r];
    // A pairwise tree, as ring/tree all-reduces do.
    float tree[kRanks];
    std::memcpy(tree, g, sizeof(g));
    for (int width = kRanks; width > 1; width /= 2) {
      for (int i = 0; i < width / 2; ++i) tree[i] = tree[2 * i] + tree[2 * i + 1];
    }
    ASSERT_EQ(static_cast<double>(forward), exact) << e;
    ASSERT_EQ(FloatToBits(forward), FloatToBits(backward)) << e;
    ASSERT_EQ(FloatToBits(forward), FloatToBits(tree[0])) << e;
  }
}

TEST(InitialParamTest, DenseIsSharedAndExpertsBelongToTheirEpRank) {
  int same_expert = 0;
  for (int64_t e = 0; e < 256; ++e) {
    EXPECT_EQ(InitialParam(5, 1, ParamKind::kDense, 0, e, 256),
              InitialParam(5, 1, ParamKind::kDense, 3, e, 256));
    same_expert += InitialParam(5, 1, ParamKind::kExpert, 0, e, 256) ==
                   InitialParam(5, 1, ParamKind::kExpert, 1, e, 256);
    EXPECT_LT(std::fabs(InitialParam(5, 1, ParamKind::kExpert, 1, e, 256)), 0.5f + 1e-6f);
  }
  EXPECT_LT(same_expert, 16);
  EXPECT_EQ(InitialParam(5, 1, ParamKind::kExpert, 1, 256, 256), 0.0f);
}

}  // namespace
}  // namespace worker
}  // namespace psync
