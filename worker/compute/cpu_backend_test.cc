#include "worker/compute/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/compute/formats.h"
#include "worker/compute/reference.h"
#include "worker/compute/synthetic.h"

namespace psync {
namespace worker {
namespace {

using ::testing::Each;

// One shard's optimizer state, in host vectors (the CPU backend accepts any host memory).
struct Shard {
  std::vector<float> param;
  std::vector<float> grad;
  std::vector<float> exp_avg;
  std::vector<float> exp_avg_sq;
};

// Realistic magnitudes: weights ~ 0.05, gradients ~ 0.01, moments from earlier steps; a few
// exact zeros and one larger weight per 100 elements.
Shard RandomShard(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  Shard s;
  for (size_t i = 0; i < n; ++i) {
    s.param.push_back(i % 100 == 7 ? 3.0f * unit(rng) : 0.05f * unit(rng));
    s.grad.push_back(i % 50 == 3 ? 0.0f : 0.01f * unit(rng));
    s.exp_avg.push_back(1e-3f * unit(rng));
    s.exp_avg_sq.push_back(i % 64 == 5 ? 0.0f : 1e-5f * std::fabs(unit(rng)));
  }
  return s;
}

absl::Status Step(ComputeBackend& backend, const AdamParams& hp, int64_t step, Shard& s,
                  ParamDtype dtype, std::vector<uint8_t>& staged) {
  return backend.AdamStepAndStage(hp, step, absl::MakeSpan(s.param), s.grad,
                                  absl::MakeSpan(s.exp_avg), absl::MakeSpan(s.exp_avg_sq), dtype,
                                  absl::MakeSpan(staged));
}

// Tolerances of the fp32 step against the double reference, for one step from identical inputs.
// With u = 2^-24 (one fp32 rounding), S_m = beta1 |m| + (1 - beta1) |g| (the sum of the
// magnitudes m' is made of), D = sqrt(v' / bc2) + eps and R = S_m / (bc1 D):
//   m': 3 roundings of terms bounded by S_m               -> |error| <= 3u S_m
//   v': 4 roundings, all terms >= 0                       -> |error| <= 4u v'
//   r = (m'/bc1)/D: m' error plus 8 relative roundings   -> |error| <= 11u R
//   update = r + wd p, then lr * update, then p - that    -> |error| <= u |p| + 14u lr (R + wd |p|)
// plus one rounding of the reference's double result to fp32. We allow 2^-20 = 16u on each
// magnitude sum and 2^-21 = 8u for the moments: a real bug (a wrong constant, a missing bias
// correction, a swapped beta) is off by orders of magnitude more.
struct Tolerances {
  double param;
  double exp_avg;
  double exp_avg_sq;
};

Tolerances StepTolerances(const AdamParams& hp, int64_t step, float p, float g, float m, float v) {
  const double beta1 = hp.beta1;
  const double beta2 = hp.beta2;
  const double s_m = beta1 * std::fabs(m) + (1 - beta1) * std::fabs(g);
  const double v_next = beta2 * v + (1 - beta2) * double{g} * g;
  const double bc1 = 1 - std::pow(beta1, step);
  const double bc2 = 1 - std::pow(beta2, step);
  const double denom = std::sqrt(v_next / bc2) + hp.eps;
  const double r = s_m / (bc1 * denom);
  return {0x1p-20 * (std::fabs(p) + hp.lr * (r + hp.weight_decay * std::fabs(p))), 0x1p-21 * s_m,
          0x1p-21 * v_next};
}

AdamParams TestParams() {
  AdamParams hp;
  hp.lr = 1e-3f;
  hp.beta1 = 0.9f;
  hp.beta2 = 0.95f;
  hp.eps = 1e-8f;
  hp.weight_decay = 0.1f;
  return hp;
}

class CpuBackendAdamTest : public ::testing::TestWithParam<ParamDtype> {
 protected:
  std::unique_ptr<ComputeBackend> backend_ = NewCpuBackend();
};

uint16_t Bf16CodeAt(const std::vector<uint8_t>& staged, size_t i) {
  return static_cast<uint16_t>(staged[2 * i] | (staged[2 * i + 1] << 8));
}

TEST_P(CpuBackendAdamTest, MatchesTheDoubleReferenceOverSeveralSteps) {
  const ParamDtype dtype = GetParam();
  const AdamParams hp = TestParams();
  for (size_t n : {1u, 31u, 32u, 33u, 4096u + 7u}) {
    Shard cpu = RandomShard(n, static_cast<uint32_t>(n));
    std::vector<uint8_t> staged(StagedBytes(dtype, n));
    std::vector<uint8_t> ref_staged(staged.size());
    int identical_params = 0;
    for (int64_t step = 1; step <= 5; ++step) {
      // Each step starts the reference from the backend's state, so the single-step bound
      // applies at every step.
      const Shard before = cpu;
      Shard ref = cpu;
      ASSERT_TRUE(Step(*backend_, hp, step, cpu, dtype, staged).ok());
      ASSERT_TRUE(ReferenceAdamStepAndStage(
                      hp, step, absl::MakeSpan(ref.param), ref.grad, absl::MakeSpan(ref.exp_avg),
                      absl::MakeSpan(ref.exp_avg_sq), dtype, absl::MakeSpan(ref_staged))
                      .ok());
      EXPECT_EQ(cpu.grad, before.grad);  // Read only.
      for (size_t i = 0; i < n; ++i) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " step=" << step << " i=" << i);
        const Tolerances tol = StepTolerances(hp, step, before.param[i], before.grad[i],
                                              before.exp_avg[i], before.exp_avg_sq[i]);
        ASSERT_NEAR(cpu.param[i], ref.param[i], tol.param);
        ASSERT_NEAR(cpu.exp_avg[i], ref.exp_avg[i], tol.exp_avg);
        ASSERT_NEAR(cpu.exp_avg_sq[i], ref.exp_avg_sq[i], tol.exp_avg_sq);
        identical_params += cpu.param[i] == ref.param[i];
      }
      // Staged bytes: exactly the encoding of the backend's own updated params.
      std::vector<uint8_t> encoded(staged.size());
      ASSERT_TRUE(EncodeStaged(dtype, cpu.param, absl::MakeSpan(encoded)).ok());
      ASSERT_EQ(staged, encoded);
      // Against the reference's staging: identical wherever the fp32 params are identical;
      // otherwise one bf16 step apart, or (MXFP8) within the format's bound of 1/8 of the
      // block max (formats_test derives it) plus the fp32 tolerance.
      if (dtype == ParamDtype::kBf16) {
        for (size_t i = 0; i < n; ++i) {
          const int diff = std::abs(Bf16CodeAt(staged, i) - Bf16CodeAt(ref_staged, i));
          ASSERT_LE(diff, cpu.param[i] == ref.param[i] ? 0 : 1) << i;
        }
      } else {
        const Mxfp8Layout layout{static_cast<int64_t>(n)};
        std::vector<float> decoded(n);
        ASSERT_TRUE(DecodeMxfp8(staged, absl::MakeSpan(decoded)).ok());
        for (int64_t b = 0; b < layout.num_blocks(); ++b) {
          const size_t begin = b * kMxfp8BlockSize;
          const size_t end = std::min<size_t>(begin + kMxfp8BlockSize, n);
          const bool same = std::equal(cpu.param.begin() + begin, cpu.param.begin() + end,
                                       ref.param.begin() + begin);
          if (same) {
            ASSERT_EQ(staged[layout.scales_offset() + b], ref_staged[layout.scales_offset() + b]);
            ASSERT_TRUE(std::equal(staged.begin() + begin, staged.begin() + end,
                                   ref_staged.begin() + begin))
                << "block " << b;
            continue;
          }
          double amax = 0.0;
          for (size_t i = begin; i < end; ++i)
            amax = std::max(amax, std::fabs(double{ref.param[i]}));
          for (size_t i = begin; i < end; ++i) {
            const Tolerances tol = StepTolerances(hp, step, before.param[i], before.grad[i],
                                                  before.exp_avg[i], before.exp_avg_sq[i]);
            ASSERT_NEAR(decoded[i], ref.param[i], amax / 8 + tol.param) << i;
          }
        }
      }
    }
    // Most elements agree bit for bit with the rounded double result (lr * update is far below
    // an ulp of most weights); a formula error would make nearly all of them differ.
    EXPECT_GT(identical_params, static_cast<int>(5 * n) / 2) << "n=" << n;
  }
}

TEST_P(CpuBackendAdamTest, NanGradientPoisonsItsStagedBlockOnly) {
  const ParamDtype dtype = GetParam();
  Shard s = RandomShard(96, 1);
  s.grad[40] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint8_t> staged(StagedBytes(dtype, 96));
  ASSERT_TRUE(Step(*backend_, TestParams(), 1, s, dtype, staged).ok());
  std::vector<float> decoded(96);
  ASSERT_TRUE(DecodeStaged(dtype, staged, absl::MakeSpan(decoded)).ok());
  for (int i = 0; i < 96; ++i) {
    // bf16: only element 40 is NaN. MXFP8: all of block 1 (elements 32..63).
    const bool poisoned = dtype == ParamDtype::kBf16 ? i == 40 : (i >= 32 && i < 64);
    EXPECT_EQ(std::isnan(decoded[i]), poisoned) << i;
  }
}

TEST_P(CpuBackendAdamTest, InvalidArgumentsChangeNothing) {
  const ParamDtype dtype = GetParam();
  Shard s = RandomShard(64, 2);
  const Shard original = s;
  std::vector<uint8_t> staged(StagedBytes(dtype, 64), 0xAB);
  AdamParams bad = TestParams();
  bad.beta2 = 1.0f;
  EXPECT_EQ(Step(*backend_, bad, 1, s, dtype, staged).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Step(*backend_, TestParams(), 0, s, dtype, staged).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> short_staged(staged.size() - 1, 0xAB);
  EXPECT_EQ(Step(*backend_, TestParams(), 1, s, dtype, short_staged).code(),
            absl::StatusCode::kInvalidArgument);
  s.grad.pop_back();
  EXPECT_EQ(Step(*backend_, TestParams(), 1, s, dtype, staged).code(),
            absl::StatusCode::kInvalidArgument);
  s.grad = original.grad;
  EXPECT_EQ(s.param, original.param);
  EXPECT_EQ(s.exp_avg, original.exp_avg);
  EXPECT_EQ(s.exp_avg_sq, original.exp_avg_sq);
  EXPECT_THAT(staged, Each(0xAB));
  EXPECT_THAT(short_staged, Each(0xAB));
}

TEST_P(CpuBackendAdamTest, EmptyShardIsANoOp) {
  Shard s;
  std::vector<uint8_t> staged;
  EXPECT_TRUE(Step(*backend_, TestParams(), 1, s, GetParam(), staged).ok());
}

// The param sync of one chunk, as the worker runs it: every rank stages its shard into its
// region of the shared buffer, the gathered buffer is dequantized into the full weights, and the
// buffer is zeroed. Two ranks share one buffer here, as they would after the all-gather.
TEST_P(CpuBackendAdamTest, StageDequantizeZeroCycle) {
  const ParamDtype dtype = GetParam();
  constexpr int kRanks = 2;
  constexpr size_t kShard = 64 + 5;
  const int64_t region_bytes = StagedBytes(dtype, kShard);
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = backend_->Allocate(kRanks * region_bytes);
  ASSERT_TRUE(buffer.ok());
  std::vector<Shard> shards;
  for (int r = 0; r < kRanks; ++r) {
    shards.push_back(RandomShard(kShard, 10 + r));
    const absl::Span<uint8_t> region = (*buffer)->bytes().subspan(r * region_bytes, region_bytes);
    ASSERT_TRUE(backend_
                    ->AdamStepAndStage(TestParams(), 1, absl::MakeSpan(shards[r].param),
                                       shards[r].grad, absl::MakeSpan(shards[r].exp_avg),
                                       absl::MakeSpan(shards[r].exp_avg_sq), dtype, region)
                    .ok());
  }
  std::vector<float> weights(kRanks * kShard, -1.0f);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(backend_
                    ->DequantizeCopy(dtype,
                                     (*buffer)->bytes().subspan(r * region_bytes, region_bytes),
                                     absl::MakeSpan(weights).subspan(r * kShard, kShard))
                    .ok());
    std::vector<uint8_t> encoded(region_bytes);
    ASSERT_TRUE(EncodeStaged(dtype, shards[r].param, absl::MakeSpan(encoded)).ok());
    std::vector<float> expected(kShard);
    ASSERT_TRUE(DecodeStaged(dtype, encoded, absl::MakeSpan(expected)).ok());
    EXPECT_EQ(std::vector<float>(weights.begin() + r * kShard, weights.begin() + (r + 1) * kShard),
              expected);
  }
  ASSERT_TRUE(backend_->Zero((*buffer)->bytes()).ok());
  EXPECT_THAT((*buffer)->bytes(), Each(0));
  // Dequantizing a zeroed buffer gives zeros: the visible symptom of a sync that ran too late.
  ASSERT_TRUE(backend_
                  ->DequantizeCopy(dtype, (*buffer)->bytes().subspan(0, region_bytes),
                                   absl::MakeSpan(weights).subspan(0, kShard))
                  .ok());
  EXPECT_THAT(std::vector<float>(weights.begin(), weights.begin() + kShard), Each(0.0f));
}

INSTANTIATE_TEST_SUITE_P(BothDtypes, CpuBackendAdamTest,
                         ::testing::Values(ParamDtype::kBf16, ParamDtype::kMxfp8),
                         [](const ::testing::TestParamInfo<ParamDtype>& info) {
                           return std::string(ParamDtypeName(info.param));
                         });

}  // namespace
}  // namespace worker
}  // namespace psync

namespace psync {
namespace worker {
namespace {

TEST(CpuBackendTest, Name) { EXPECT_EQ(NewCpuBackend()->Name(), "cpu"); }

TEST(CpuBackendTest, AllocateGivesZeroedAlignedMemory) {
  std::unique_ptr<ComputeBackend> backend = NewCpuBackend();
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = backend->Allocate(1000);
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ((*buffer)->size_bytes(), 1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*buffer)->bytes().data()) % 256, 0u);
  EXPECT_THAT((*buffer)->bytes(), Each(0));
  EXPECT_EQ((*buffer)->As<float>().size(), 250u);
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> empty = backend->Allocate(0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->size_bytes(), 0);
  EXPECT_EQ(backend->Allocate(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuBackendTest, CopiesRoundTripAndCheckSizes) {
  std::unique_ptr<ComputeBackend> backend = NewCpuBackend();
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = backend->Allocate(4 * sizeof(float));
  ASSERT_TRUE(buffer.ok());
  const std::vector<float> host = {1.0f, -2.0f, 3.5f, 0.0f};
  ASSERT_TRUE(backend->CopyFromHost(absl::MakeConstSpan(host), (*buffer)->As<float>()).ok());
  std::vector<float> back(4);
  ASSERT_TRUE(
      backend->CopyToHost(absl::Span<const float>((*buffer)->As<float>()), absl::MakeSpan(back))
          .ok());
  EXPECT_EQ(back, host);
  std::vector<float> wrong(3, 9.0f);
  EXPECT_EQ(
      backend->CopyToHost(absl::Span<const float>((*buffer)->As<float>()), absl::MakeSpan(wrong))
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong, Each(9.0f));
}

TEST(CpuBackendTest, ZeroTouchesOnlyTheRegion) {
  std::unique_ptr<ComputeBackend> backend = NewCpuBackend();
  std::vector<uint8_t> bytes(100, 0xCD);
  ASSERT_TRUE(backend->Zero(absl::MakeSpan(bytes).subspan(10, 50)).ok());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(bytes[i], i >= 10 && i < 60 ? 0 : 0xCD) << i;
  EXPECT_TRUE(backend->Zero(absl::Span<uint8_t>()).ok());
}

TEST(CpuBackendTest, DequantizeCopyDecodesExactlyAndChecksSizes) {
  std::unique_ptr<ComputeBackend> backend = NewCpuBackend();
  const std::vector<float> values = {1.0f, -3.0f, 0.1f, 500.0f, 0.0f};
  for (ParamDtype dtype : {ParamDtype::kBf16, ParamDtype::kMxfp8}) {
    std::vector<uint8_t> staged(StagedBytes(dtype, values.size()));
    ASSERT_TRUE(EncodeStaged(dtype, values, absl::MakeSpan(staged)).ok());
    std::vector<float> expected(values.size());
    ASSERT_TRUE(DecodeStaged(dtype, staged, absl::MakeSpan(expected)).ok());
    std::vector<float> weights(values.size());
    ASSERT_TRUE(backend->DequantizeCopy(dtype, staged, absl::MakeSpan(weights)).ok());
    EXPECT_EQ(weights, expected);
    std::vector<float> wrong(values.size() + 1, 7.0f);
    EXPECT_EQ(backend->DequantizeCopy(dtype, staged, absl::MakeSpan(wrong)).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(wrong, Each(7.0f));
  }
  // Exact decoded values (bf16 of 0.1 is 0x3DCD; MXFP8 block scale 2^0 from amax 500).
  std::vector<uint8_t> bf16(10);
  ASSERT_TRUE(EncodeBf16(values, absl::MakeSpan(bf16)).ok());
  std::vector<float> weights(values.size());
  ASSERT_TRUE(backend->DequantizeCopy(ParamDtype::kBf16, bf16, absl::MakeSpan(weights)).ok());
  EXPECT_EQ(weights[2], DecodeBf16(uint16_t{0x3DCD}));
  std::vector<uint8_t> mx(6);
  ASSERT_TRUE(EncodeMxfp8(values, absl::MakeSpan(mx)).ok());
  ASSERT_TRUE(backend->DequantizeCopy(ParamDtype::kMxfp8, mx, absl::MakeSpan(weights)).ok());
  EXPECT_THAT(weights, ::testing::ElementsAre(1.0f, -3.0f, 0x1.ap-4f, 448.0f, 0.0f));
}

TEST(CpuBackendTest, FillSyntheticMatchesTheHash) {
  std::unique_ptr<ComputeBackend> backend = NewCpuBackend();
  std::vector<float> out(100);
  ASSERT_TRUE(backend->FillSynthetic(11, 12, 3, 1000, absl::MakeSpan(out)).ok());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(out[i], SyntheticGradient(11, 12, 3, 1000 + i)) << i;
  EXPECT_EQ(backend->FillSynthetic(11, 12, 3, -1, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace worker
}  // namespace psync
