#include "worker/compute/backend_checks.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace psync {
namespace worker {
namespace {

using ::absl::StatusCode;

bool InvalidNaming(const absl::Status& status, absl::string_view word) {
  return status.code() == StatusCode::kInvalidArgument && absl::StrContains(status.message(), word);
}

TEST(CheckAdamParamsTest, Ranges) {
  EXPECT_TRUE(CheckAdamParams(AdamParams()).ok());
  AdamParams hp;
  hp.lr = -1.0f;
  EXPECT_TRUE(InvalidNaming(CheckAdamParams(hp), "lr"));
  hp = AdamParams();
  hp.lr = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(InvalidNaming(CheckAdamParams(hp), "lr"));
  hp = AdamParams();
  hp.beta1 = 1.0f;
  EXPECT_TRUE(InvalidNaming(CheckAdamParams(hp), "beta1"));
  hp = AdamParams();
  hp.beta2 = -0.1f;
  EXPECT_TRUE(InvalidNaming(CheckAdamParams(hp), "beta2"));
  hp = AdamParams();
  hp.beta2 = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(InvalidNaming(CheckAdamParams(hp), "beta2"));
  hp = AdamParams();
  hp.eps = 0.0f;
  EXPECT_TRUE(InvalidNaming(CheckAdamParams(hp), "eps"));
  hp = AdamParams();
  hp.weight_decay = -0.01f;
  EXPECT_TRUE(InvalidNaming(CheckAdamParams(hp), "weight_decay"));
  hp = AdamParams();
  hp.beta1 = 0.0f;
  hp.beta2 = 0.0f;
  hp.lr = 0.0f;
  EXPECT_TRUE(CheckAdamParams(hp).ok());
}

class CheckAdamStepArgsTest : public ::testing::Test {
 protected:
  absl::Status Check(ParamDtype dtype, absl::Span<const uint8_t> staged, int64_t step = 1) {
    return CheckAdamStepArgs(AdamParams(), step, param_, grad_, m_, v_, dtype, staged);
  }

  std::vector<float> param_ = std::vector<float>(33);
  std::vector<float> grad_ = std::vector<float>(33);
  std::vector<float> m_ = std::vector<float>(33);
  std::vector<float> v_ = std::vector<float>(33);
  alignas(4) uint8_t staged_[80] = {};
};

TEST_F(CheckAdamStepArgsTest, AcceptsMatchingSizes) {
  EXPECT_TRUE(Check(ParamDtype::kBf16, absl::MakeConstSpan(staged_, 66)).ok());
  EXPECT_TRUE(Check(ParamDtype::kMxfp8, absl::MakeConstSpan(staged_, 35)).ok());
}

TEST_F(CheckAdamStepArgsTest, RejectsStepBelowOne) {
  EXPECT_TRUE(InvalidNaming(Check(ParamDtype::kBf16, absl::MakeConstSpan(staged_, 66), 0), "step"));
}

TEST_F(CheckAdamStepArgsTest, RejectsMismatchedSizes) {
  grad_.resize(32);
  EXPECT_TRUE(InvalidNaming(Check(ParamDtype::kBf16, absl::MakeConstSpan(staged_, 66)), "grad"));
}

TEST_F(CheckAdamStepArgsTest, RejectsWrongStagedSize) {
  EXPECT_TRUE(InvalidNaming(Check(ParamDtype::kMxfp8, absl::MakeConstSpan(staged_, 34)), "35"));
  EXPECT_TRUE(InvalidNaming(Check(ParamDtype::kBf16, absl::MakeConstSpan(staged_, 35)), "66"));
}

TEST_F(CheckAdamStepArgsTest, RejectsMisalignedBf16Staged) {
  EXPECT_TRUE(
      InvalidNaming(Check(ParamDtype::kBf16, absl::MakeConstSpan(staged_ + 1, 66)), "aligned"));
  // MXFP8 regions are bytes: any alignment.
  EXPECT_TRUE(Check(ParamDtype::kMxfp8, absl::MakeConstSpan(staged_ + 1, 35)).ok());
}

TEST_F(CheckAdamStepArgsTest, RejectsUnknownDtype) {
  EXPECT_TRUE(
      InvalidNaming(Check(static_cast<ParamDtype>(7), absl::MakeConstSpan(staged_, 66)), "dtype"));
}

TEST_F(CheckAdamStepArgsTest, RejectsOverlap) {
  std::vector<float> both(66);
  const absl::Span<const float> a(both.data(), 33);
  const absl::Span<const float> b(both.data() + 32, 33);  // Shares one element with a.
  EXPECT_TRUE(InvalidNaming(CheckAdamStepArgs(AdamParams(), 1, a, b, m_, v_, ParamDtype::kMxfp8,
                                              absl::MakeConstSpan(staged_, 35)),
                            "overlap"));
  const absl::Span<const float> adjacent(both.data() + 33, 33);
  EXPECT_TRUE(CheckAdamStepArgs(AdamParams(), 1, a, adjacent, m_, v_, ParamDtype::kMxfp8,
                                absl::MakeConstSpan(staged_, 35))
                  .ok());
  // The staged region inside the grad (a shared param/grad buffer misuse).
  const absl::Span<const uint8_t> staged_in_grad(reinterpret_cast<const uint8_t*>(grad_.data()),
                                                 35);
  EXPECT_TRUE(InvalidNaming(Check(ParamDtype::kMxfp8, staged_in_grad), "grad and staged"));
}

TEST(CheckDequantizeArgsTest, SizesAndOverlap) {
  std::vector<float> weights(40);
  alignas(4) uint8_t staged[80] = {};
  EXPECT_TRUE(
      CheckDequantizeArgs(ParamDtype::kBf16, absl::MakeConstSpan(staged, 80), weights).ok());
  EXPECT_TRUE(
      CheckDequantizeArgs(ParamDtype::kMxfp8, absl::MakeConstSpan(staged, 42), weights).ok());
  EXPECT_TRUE(InvalidNaming(
      CheckDequantizeArgs(ParamDtype::kMxfp8, absl::MakeConstSpan(staged, 41), weights), "42"));
  const absl::Span<const uint8_t> inside(reinterpret_cast<const uint8_t*>(weights.data()), 42);
  EXPECT_TRUE(InvalidNaming(CheckDequantizeArgs(ParamDtype::kMxfp8, inside, weights), "overlap"));
}

TEST(CheckCopyArgsTest, SizesAndOverlap) {
  uint8_t a[8] = {};
  uint8_t b[8] = {};
  EXPECT_TRUE(CheckCopyArgs(a, 8, b, 8).ok());
  EXPECT_TRUE(CheckCopyArgs(a, 0, b, 0).ok());
  EXPECT_TRUE(InvalidNaming(CheckCopyArgs(a, 8, b, 7), "bytes"));
  EXPECT_TRUE(InvalidNaming(CheckCopyArgs(a, 4, a + 2, 4), "overlap"));
}

TEST(CheckFillSyntheticArgsTest, Ranges) {
  EXPECT_TRUE(CheckFillSyntheticArgs(0, 100).ok());
  EXPECT_TRUE(InvalidNaming(CheckFillSyntheticArgs(-1, 100), "first_index"));
  EXPECT_TRUE(InvalidNaming(CheckFillSyntheticArgs(std::numeric_limits<int64_t>::max() - 10, 11),
                            "overflow"));
  EXPECT_TRUE(CheckFillSyntheticArgs(std::numeric_limits<int64_t>::max() - 10, 10).ok());
}

}  // namespace
}  // namespace worker
}  // namespace psync
