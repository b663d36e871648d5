#include "worker/reference_model.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/formats.h"
#include "worker/synthetic_model.h"

namespace psync {
namespace worker {
namespace {

constexpr uint64_t kSeed = 42;

ModelConfig TinyConfig(int world, int rank, int experts, ParamDtype dtype) {
  ModelConfig c;
  c.world_size = world;
  c.rank = rank;
  c.expert_parallel = experts;
  c.num_chunks = 2;
  c.dense_elements = 40;  // padded to a multiple of 32 * group size: the tail is padding
  c.expert_elements = 40;
  c.buckets = 1;
  c.dtype = dtype;
  return c;
}

AdamParams Adam() {
  AdamParams a;
  a.lr = 1.0f / 64;
  a.weight_decay = 0.0f;
  return a;
}

// After AdamW's first step (bias-corrected moments m = g, v = g^2) the update is
// g / (|g| + eps) ~ sign(g), so p' = p - lr * sign(g); the eps term moves it by at most
// lr * eps / |g| <= 2^-6 * 1e-8 / 2^-10 (|g| >= 2^-10 when it is not 0).
double HandComputedAfterOneStep(double p, double g, double lr) {
  if (g == 0) return p;
  return p - lr * (g > 0 ? 1.0 : -1.0);
}

TEST(ReferenceModelTest, OneStepMatchesAHandComputedAdamStep) {
  const ModelConfig config = TinyConfig(4, 3, 2, ParamDtype::kBf16);
  ReferenceModel reference(config, kSeed, Adam());
  ASSERT_TRUE(reference.Step(0).ok());
  for (int chunk = 0; chunk < 2; ++chunk) {
    for (ParamKind kind : kParamKinds) {
      const absl::Span<const float> main = reference.MainParams(chunk, kind);
      const absl::Span<const float> expected = reference.ExpectedWeights(chunk, kind);
      const int64_t n = config.Layout(kind).padded_elements();  // 128 dense, 64 expert
      ASSERT_EQ(static_cast<int64_t>(main.size()), n);
      // Dense: all 4 ranks; expert of EP rank 1: ranks 1 and 3.
      const std::vector<int> ranks =
          kind == ParamKind::kDense ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{1, 3};
      for (int64_t e = 0; e < n; ++e) {
        double g = 0;
        for (int r : ranks) g += ExactGradient(kSeed, 0, r, chunk, kind, e, 40);
        const double p0 = InitialParam(kSeed, chunk, kind, 1, e, 40);
        const double want = HandComputedAfterOneStep(p0, g, 1.0 / 64);
        SCOPED_TRACE(testing::Message()
                     << "chunk " << chunk << " " << ParamKindName(kind) << " element " << e);
        EXPECT_NEAR(main[e], want, 1e-6);
        // bf16 keeps 8 significant bits: within half an ulp of the fp32 main param.
        EXPECT_NEAR(expected[e], want, std::fabs(want) / 256 + 1e-6);
        if (e >= 40) {
          EXPECT_EQ(main[e], 0.0f);  // padding: zero gradient, zero start
          EXPECT_EQ(expected[e], 0.0f);
        }
      }
    }
  }
}

TEST(ReferenceModelTest, ExpectedWeightsAreTheStagedRoundTripOfTheMainParams) {
  for (ParamDtype dtype : {ParamDtype::kBf16, ParamDtype::kMxfp8}) {
    const ModelConfig config = TinyConfig(2, 0, 1, dtype);
    ReferenceModel reference(config, kSeed, Adam());
    for (int64_t step = 0; step < 3; ++step) ASSERT_TRUE(reference.Step(step).ok());
    EXPECT_EQ(reference.steps_run(), 3);
    const absl::Span<const float> main = reference.MainParams(1, ParamKind::kExpert);
    std::vector<uint8_t> staged(StagedBytes(dtype, main.size()));
    std::vector<float> round_trip(main.size());
    ASSERT_TRUE(EncodeStaged(dtype, main, absl::MakeSpan(staged)).ok());
    ASSERT_TRUE(DecodeStaged(dtype, staged, absl::MakeSpan(round_trip)).ok());
    const absl::Span<const float> expected = reference.ExpectedWeights(1, ParamKind::kExpert);
    EXPECT_EQ(0, std::memcmp(round_trip.data(), expected.data(), 4 * main.size()));
  }
}

TEST(ReferenceModelTest, InitialWeightsAreWhatTheReferenceStartsFrom) {
  const ModelConfig config = TinyConfig(2, 1, 2, ParamDtype::kMxfp8);
  ReferenceModel reference(config, kSeed, Adam());
  const std::vector<float> initial = InitialWeights(config, kSeed, 0, ParamKind::kExpert);
  const absl::Span<const float> expected = reference.ExpectedWeights(0, ParamKind::kExpert);
  ASSERT_EQ(initial.size(), expected.size());
  EXPECT_EQ(0, std::memcmp(initial.data(), expected.data(), 4 * initial.size()));
}

TEST(ReferenceModelTest, StepsMustRunInOrder) {
  ReferenceModel reference(TinyConfig(2, 0, 1, ParamDtype::kBf16), kSeed, Adam());
  EXPECT_EQ(reference.Step(1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(reference.Step(0).ok());
  EXPECT_EQ(reference.Step(0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reference.steps_run(), 1);
}

}  // namespace
}  // namespace worker
}  // namespace psync
