// Verifies the CUDA backend against the CPU backend. Skips when the machine has no usable GPU.
#include "worker/compute/cuda_backend.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/compute/cpu_backend.h"
#include "worker/compute/cuda_kernels.h"
#include "worker/compute/formats.h"

namespace psync {
namespace worker {
namespace {

using ::testing::Each;

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

// Bit-identical, except that any NaN equals any NaN: the two backends agree on where NaNs
// are, but x86 and the GPU propagate different NaN payloads.
void ExpectSameFloats(const std::vector<float>& gpu, const std::vector<float>& cpu,
                      absl::string_view what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  int64_t mismatches = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const bool same = Bits(gpu[i]) == Bits(cpu[i]) || (std::isnan(gpu[i]) && std::isnan(cpu[i]));
    if (!same && ++mismatches <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: gpu " << gpu[i] << " (0x" << std::hex << Bits(gpu[i])
                    << ") cpu " << cpu[i] << " (0x" << Bits(cpu[i]) << ")";
    }
  }
  EXPECT_EQ(mismatches, 0) << what;
}

bool IsBf16Nan(uint16_t code) { return (code & 0x7FFF) > 0x7F80; }

// Staged bytes must be identical; for bf16 two NaN codes count as equal (payloads, as above).
void ExpectSameStaged(ParamDtype dtype, const std::vector<uint8_t>& gpu,
                      const std::vector<uint8_t>& cpu) {
  ASSERT_EQ(gpu.size(), cpu.size());
  if (dtype == ParamDtype::kMxfp8) {
    int64_t mismatches = 0;
    for (size_t i = 0; i < gpu.size(); ++i) {
      if (gpu[i] != cpu[i] && ++mismatches <= 5) {
        ADD_FAILURE() << "staged byte " << i << ": gpu " << int{gpu[i]} << " cpu " << int{cpu[i]};
      }
    }
    EXPECT_EQ(mismatches, 0);
    return;
  }
  int64_t mismatches = 0;
  for (size_t i = 0; i < gpu.size() / 2; ++i) {
    const uint16_t g = static_cast<uint16_t>(gpu[2 * i] | (gpu[2 * i + 1] << 8));
    const uint16_t c = static_cast<uint16_t>(cpu[2 * i] | (cpu[2 * i + 1] << 8));
    if (g != c && !(IsBf16Nan(g) && IsBf16Nan(c)) && ++mismatches <= 5) {
      ADD_FAILURE() << "bf16 code " << i << ": gpu 0x" << std::hex << g << " cpu 0x" << c;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// Host-side optimizer state of one shard, with the awkward values mixed in: exact zeros, fp32
// subnormals, weights large enough to saturate MXFP8, and (optionally) NaN / Inf gradients.
struct HostShard {
  std::vector<float> param, grad, exp_avg, exp_avg_sq;
};

HostShard RandomShard(size_t n, uint32_t seed, bool with_specials) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  HostShard s;
  for (size_t i = 0; i < n; ++i) {
    float p = 0.05f * unit(rng);
    if (i % 97 == 11) p = 0.0f;
    if (i % 89 == 5) p = 1e-39f;  // Subnormal.
    if (i % 83 == 7) p = 300.0f * unit(rng);
    float g = 0.01f * unit(rng);
    if (with_specials && i % 1009 == 17) g = std::numeric_limits<float>::quiet_NaN();
    if (with_specials && i % 1013 == 19) g = std::numeric_limits<float>::infinity();
    s.param.push_back(p);
    s.grad.push_back(g);
    s.exp_avg.push_back(1e-3f * unit(rng));
    s.exp_avg_sq.push_back(i % 64 == 5 ? 0.0f : 1e-5f * std::fabs(unit(rng)));
  }
  return s;
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const int error = cuda::GetDeviceCount(&count);
    if (error != 0 || count == 0) {
      // Built only with --config=cuda: a CUDA build without a GPU is a failure, not a pass.
      GTEST_FAIL() << "No usable CUDA GPU on this machine ("
                   << (error != 0 ? std::string(cuda::ErrorString(error)) : "0 devices")
                   << "); the CUDA backend tests need one.";
    }
    absl::StatusOr<std::unique_ptr<ComputeBackend>> gpu = NewCudaBackend(0);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = *std::move(gpu);
    cpu_ = NewCpuBackend();
  }

  std::unique_ptr<DeviceBuffer> Upload(const std::vector<float>& host) {
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer =
        gpu_->Allocate(host.size() * sizeof(float));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_TRUE(gpu_->CopyFromHost(absl::MakeConstSpan(host), (*buffer)->As<float>()).ok());
    return *std::move(buffer);
  }

  std::unique_ptr<DeviceBuffer> Upload(const std::vector<uint8_t>& host) {
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = gpu_->Allocate(host.size());
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_TRUE(gpu_->CopyFromHost(absl::MakeConstSpan(host), (*buffer)->bytes()).ok());
    return *std::move(buffer);
  }

  std::vector<float> DownloadFloats(const DeviceBuffer& buffer) {
    std::vector<float> host(buffer.size_bytes() / sizeof(float));
    EXPECT_TRUE(
        gpu_->CopyToHost(absl::Span<const float>(buffer.As<float>()), absl::MakeSpan(host)).ok());
    return host;
  }

  std::vector<uint8_t> DownloadBytes(const DeviceBuffer& buffer) {
    std::vector<uint8_t> host(buffer.size_bytes());
    EXPECT_TRUE(
        gpu_->CopyToHost(absl::Span<const uint8_t>(buffer.bytes()), absl::MakeSpan(host)).ok());
    return host;
  }

  std::unique_ptr<ComputeBackend> gpu_;
  std::unique_ptr<ComputeBackend> cpu_;
};

TEST_F(CudaBackendTest, NameAndAllocation) {
  EXPECT_EQ(gpu_->Name(), "cuda:0");
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = gpu_->Allocate(1 << 20);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*buffer)->bytes().data()) % 256, 0u);
  EXPECT_THAT(DownloadBytes(**buffer), Each(0));
  EXPECT_TRUE(gpu_->Allocate(0).ok());
  EXPECT_EQ(gpu_->Allocate(-5).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CudaBackendTest, AdamStepAndStageIsBitIdenticalToTheCpuBackend) {
  AdamParams hp;
  hp.lr = 1e-3f;
  hp.beta1 = 0.9f;
  hp.beta2 = 0.95f;
  hp.eps = 1e-8f;
  hp.weight_decay = 0.1f;
  for (ParamDtype dtype : {ParamDtype::kBf16, ParamDtype::kMxfp8}) {
    for (size_t n : {1u, 31u, 32u, 33u, 1000u, (1u << 20) + 13u}) {
      SCOPED_TRACE(absl::StrCat(ParamDtypeName(dtype), " n=", n));
      HostShard cpu = RandomShard(n, static_cast<uint32_t>(n), /*with_specials=*/true);
      std::unique_ptr<DeviceBuffer> p = Upload(cpu.param);
      std::unique_ptr<DeviceBuffer> g = Upload(cpu.grad);
      std::unique_ptr<DeviceBuffer> m = Upload(cpu.exp_avg);
      std::unique_ptr<DeviceBuffer> v = Upload(cpu.exp_avg_sq);
      std::unique_ptr<DeviceBuffer> staged =
          Upload(std::vector<uint8_t>(StagedBytes(dtype, n), 0xEE));
      std::vector<uint8_t> cpu_staged(staged->size_bytes());
      for (int64_t step = 1; step <= 3; ++step) {
        ASSERT_TRUE(gpu_->AdamStepAndStage(hp, step, p->As<float>(), g->As<float>(), m->As<float>(),
                                           v->As<float>(), dtype, staged->bytes())
                        .ok());
        ASSERT_TRUE(cpu_->AdamStepAndStage(hp, step, absl::MakeSpan(cpu.param), cpu.grad,
                                           absl::MakeSpan(cpu.exp_avg),
                                           absl::MakeSpan(cpu.exp_avg_sq), dtype,
                                           absl::MakeSpan(cpu_staged))
                        .ok());
        ExpectSameFloats(DownloadFloats(*p), cpu.param, "main_param");
        ExpectSameFloats(DownloadFloats(*m), cpu.exp_avg, "exp_avg");
        ExpectSameFloats(DownloadFloats(*v), cpu.exp_avg_sq, "exp_avg_sq");
        ExpectSameStaged(dtype, DownloadBytes(*staged), cpu_staged);
        if (HasFailure()) return;
      }
    }
  }
}

TEST_F(CudaBackendTest, DequantizeCopyMatchesTheCpuBackendOnEveryBytePattern) {
  std::mt19937 rng(3);
  for (ParamDtype dtype : {ParamDtype::kBf16, ParamDtype::kMxfp8}) {
    const size_t n = 100000 + 3;
    std::vector<uint8_t> staged(StagedBytes(dtype, n));
    for (uint8_t& b : staged) b = static_cast<uint8_t>(rng());
    // Make sure every byte value appears as an element and as a scale.
    for (int i = 0; i < 256; ++i) staged[i] = static_cast<uint8_t>(i);
    if (dtype == ParamDtype::kMxfp8) {
      for (int i = 0; i < 256; ++i) staged[n + i] = static_cast<uint8_t>(i);
    }
    std::unique_ptr<DeviceBuffer> device_staged = Upload(staged);
    std::unique_ptr<DeviceBuffer> weights = Upload(std::vector<float>(n, -1.0f));
    ASSERT_TRUE(gpu_->DequantizeCopy(dtype, device_staged->bytes(), weights->As<float>()).ok());
    std::vector<float> expected(n);
    ASSERT_TRUE(cpu_->DequantizeCopy(dtype, staged, absl::MakeSpan(expected)).ok());
    ExpectSameFloats(DownloadFloats(*weights), expected, std::string(ParamDtypeName(dtype)));
  }
}

TEST_F(CudaBackendTest, ZeroClearsExactlyTheRegion) {
  std::unique_ptr<DeviceBuffer> buffer = Upload(std::vector<uint8_t>(4096, 0xCD));
  ASSERT_TRUE(gpu_->Zero(buffer->bytes().subspan(100, 1000)).ok());
  const std::vector<uint8_t> host = DownloadBytes(*buffer);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(host[i], i >= 100 && i < 1100 ? 0 : 0xCD) << i;
}

TEST_F(CudaBackendTest, FillSyntheticMatchesTheCpuBackend) {
  const size_t n = (1 << 20) + 5;
  std::unique_ptr<DeviceBuffer> out = Upload(std::vector<float>(n));
  ASSERT_TRUE(gpu_->FillSynthetic(7, 8, 9, 12345, out->As<float>()).ok());
  std::vector<float> expected(n);
  ASSERT_TRUE(cpu_->FillSynthetic(7, 8, 9, 12345, absl::MakeSpan(expected)).ok());
  ExpectSameFloats(DownloadFloats(*out), expected, "synthetic");
}

TEST_F(CudaBackendTest, StageGatherDequantizeZeroCycle) {
  constexpr size_t kShard = 4096 + 17;
  const ParamDtype dtype = ParamDtype::kMxfp8;
  const int64_t region_bytes = StagedBytes(dtype, kShard);
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = gpu_->Allocate(2 * region_bytes);
  ASSERT_TRUE(buffer.ok());
  std::vector<float> cpu_weights(2 * kShard);
  std::vector<uint8_t> cpu_buffer(2 * region_bytes);
  for (int r = 0; r < 2; ++r) {
    HostShard s = RandomShard(kShard, 40 + r, /*with_specials=*/false);
    std::unique_ptr<DeviceBuffer> p = Upload(s.param);
    std::unique_ptr<DeviceBuffer> g = Upload(s.grad);
    std::unique_ptr<DeviceBuffer> m = Upload(s.exp_avg);
    std::unique_ptr<DeviceBuffer> v = Upload(s.exp_avg_sq);
    ASSERT_TRUE(gpu_->AdamStepAndStage(AdamParams(), 1, p->As<float>(), g->As<float>(),
                                       m->As<float>(), v->As<float>(), dtype,
                                       (*buffer)->bytes().subspan(r * region_bytes, region_bytes))
                    .ok());
    ASSERT_TRUE(
        cpu_->AdamStepAndStage(AdamParams(), 1, absl::MakeSpan(s.param), s.grad,
                               absl::MakeSpan(s.exp_avg), absl::MakeSpan(s.exp_avg_sq), dtype,
                               absl::MakeSpan(cpu_buffer).subspan(r * region_bytes, region_bytes))
            .ok());
  }
  std::unique_ptr<DeviceBuffer> weights = Upload(std::vector<float>(2 * kShard, -1.0f));
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(gpu_->DequantizeCopy(dtype,
                                     (*buffer)->bytes().subspan(r * region_bytes, region_bytes),
                                     weights->As<float>().subspan(r * kShard, kShard))
                    .ok());
    ASSERT_TRUE(cpu_->DequantizeCopy(
                        dtype, absl::MakeSpan(cpu_buffer).subspan(r * region_bytes, region_bytes),
                        absl::MakeSpan(cpu_weights).subspan(r * kShard, kShard))
                    .ok());
  }
  ExpectSameFloats(DownloadFloats(*weights), cpu_weights, "weights");
  ASSERT_TRUE(gpu_->Zero((*buffer)->bytes()).ok());
  EXPECT_THAT(DownloadBytes(**buffer), Each(0));
}

TEST_F(CudaBackendTest, RejectsHostMemoryAndKeepsWorking) {
  std::vector<float> host(64, 1.0f);
  std::vector<uint8_t> host_staged(StagedBytes(ParamDtype::kMxfp8, 64));
  std::vector<float> grad(64, 0.5f);
  std::vector<float> m(64), v(64);
  const absl::Status status =
      gpu_->AdamStepAndStage(AdamParams(), 1, absl::MakeSpan(host), grad, absl::MakeSpan(m),
                             absl::MakeSpan(v), ParamDtype::kMxfp8, absl::MakeSpan(host_staged));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(host, Each(1.0f));
  EXPECT_EQ(gpu_->Zero(absl::MakeSpan(host_staged)).code(), absl::StatusCode::kInvalidArgument);
  // A device span whose end lies far outside any allocation is rejected too.
  std::unique_ptr<DeviceBuffer> small = Upload(std::vector<float>(16));
  EXPECT_EQ(gpu_->Zero(absl::Span<uint8_t>(small->bytes().data(), size_t{1} << 40)).code(),
            absl::StatusCode::kInvalidArgument);
  // The backend is still healthy.
  std::unique_ptr<DeviceBuffer> out = Upload(std::vector<float>(16));
  EXPECT_TRUE(gpu_->FillSynthetic(1, 1, 1, 0, out->As<float>()).ok());
}

}  // namespace
}  // namespace worker
}  // namespace psync
