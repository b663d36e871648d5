// compute_bench_cuda: achieved memory bandwidth of the fused AdamW+stage kernel on one GPU.
//
// For each staged dtype and size it first checks, on fresh random data, that the CUDA backend's
// results equal the CPU backend's; then it times the kernel with CUDA events (warm-up, then the
// median of --reps runs, each queued behind a short spin kernel so host launch latency is not
// timed) and compares the bytes the kernel moves per second with a device-to-device cudaMemcpy
// of 16 bytes per element (about the kernel's traffic), timed the same way in the same run.
// Exits non-zero if a check fails. Needs about 50 bytes of GPU memory per element.
//
// Bytes moved per element: read param, grad, exp_avg, exp_avg_sq (16) and write param, exp_avg,
// exp_avg_sq (12), plus the staged bytes (bf16: 2; MXFP8: 1 + 1/32). A memcpy of B bytes moves
// 2B (read and write).
//
// Usage: compute_bench_cuda [--sizes=16777216,67108864,268435456] [--reps=50] [--warmup=5]
//                           [--check_elements=1048589] [--seed=N]

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "worker/compute/adam_update.h"
#include "worker/compute/compute_backend.h"
#include "worker/compute/cpu_backend.h"
#include "worker/compute/cuda_backend.h"
#include "worker/compute/cuda_kernels.h"
#include "worker/compute/formats.h"

ABSL_FLAG(std::string, sizes, "16777216,67108864,268435456",
          "Comma-separated element counts to time (16M, 64M, 256M by default).");
ABSL_FLAG(int, reps, 50, "Timed runs per measurement; the median is reported.");
ABSL_FLAG(int, warmup, 5, "Untimed runs before timing.");
ABSL_FLAG(int64_t, check_elements, (1 << 20) + 13,
          "Elements in the GPU-vs-CPU check (not a multiple of 32 on purpose).");
ABSL_FLAG(uint32_t, seed, 0, "Seed of the check's random data; 0 picks a fresh one.");

namespace psync {
namespace worker {
namespace {

constexpr int64_t kSpinNanoseconds = 100000;

absl::Status CudaStatus(absl::string_view what, int error) {
  if (error == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cuda::ErrorString(error)));
}

#define PSYNC_RETURN_IF_ERROR(expr)      \
  do {                                   \
    const absl::Status status_ = (expr); \
    if (!status_.ok()) return status_;   \
  } while (false)

bool SameFloat(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y || (std::isnan(a) && std::isnan(b));
}

// Uploads host data into a new device buffer.
template <typename T>
absl::StatusOr<std::unique_ptr<DeviceBuffer>> Upload(ComputeBackend& gpu,
                                                     const std::vector<T>& host) {
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = gpu.Allocate(host.size() * sizeof(T));
  if (!buffer.ok()) return buffer.status();
  PSYNC_RETURN_IF_ERROR(gpu.CopyFromHost(absl::MakeConstSpan(host), (*buffer)->As<T>()));
  return buffer;
}

template <typename T>
absl::StatusOr<std::vector<T>> Download(ComputeBackend& gpu, const DeviceBuffer& buffer) {
  std::vector<T> host(buffer.size_bytes() / sizeof(T));
  PSYNC_RETURN_IF_ERROR(gpu.CopyToHost(absl::Span<const T>(buffer.As<T>()), absl::MakeSpan(host)));
  return host;
}

// One step on fresh random data through both backends; every output must match (NaN == NaN).
absl::Status CheckAgainstCpu(ComputeBackend& gpu, ParamDtype dtype, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> p(n), g(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = 0.02f * normal(rng);
    g[i] = 1e-3f * normal(rng);
    m[i] = 1e-4f * normal(rng);
    v[i] = 1e-7f * std::fabs(normal(rng));
  }
  AdamParams hp;
  hp.weight_decay = 0.1f;
  const int64_t step = 7;

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> dp = Upload(gpu, p), dg = Upload(gpu, g),
                                                dm = Upload(gpu, m), dv = Upload(gpu, v);
  for (auto* b : {&dp, &dg, &dm, &dv}) PSYNC_RETURN_IF_ERROR(b->status());
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> ds = gpu.Allocate(StagedBytes(dtype, n));
  PSYNC_RETURN_IF_ERROR(ds.status());
  PSYNC_RETURN_IF_ERROR(gpu.AdamStepAndStage(hp, step, (*dp)->As<float>(), (*dg)->As<float>(),
                                             (*dm)->As<float>(), (*dv)->As<float>(), dtype,
                                             (*ds)->bytes()));
  std::unique_ptr<ComputeBackend> cpu = NewCpuBackend();
  std::vector<uint8_t> staged(StagedBytes(dtype, n));
  PSYNC_RETURN_IF_ERROR(cpu->AdamStepAndStage(hp, step, absl::MakeSpan(p), g, absl::MakeSpan(m),
                                              absl::MakeSpan(v), dtype, absl::MakeSpan(staged)));

  const std::pair<const char*, const std::vector<float>*> floats[] = {
      {"main_param", &p}, {"exp_avg", &m}, {"exp_avg_sq", &v}};
  const std::unique_ptr<DeviceBuffer>* device_floats[] = {&*dp, &*dm, &*dv};
  for (int k = 0; k < 3; ++k) {
    absl::StatusOr<std::vector<float>> got = Download<float>(gpu, **device_floats[k]);
    PSYNC_RETURN_IF_ERROR(got.status());
    for (int64_t i = 0; i < n; ++i) {
      if (!SameFloat((*got)[i], (*floats[k].second)[i])) {
        return absl::InternalError(absl::StrFormat("%s[%d]: gpu %a, cpu %a", floats[k].first, i,
                                                   (*got)[i], (*floats[k].second)[i]));
      }
    }
  }
  absl::StatusOr<std::vector<uint8_t>> got_staged = Download<uint8_t>(gpu, **ds);
  PSYNC_RETURN_IF_ERROR(got_staged.status());
  if (*got_staged != staged) {
    const auto diff = std::mismatch(got_staged->begin(), got_staged->end(), staged.begin());
    return absl::InternalError(absl::StrCat("staged byte ", diff.first - got_staged->begin(),
                                            " differs: gpu ", *diff.first, ", cpu ", *diff.second));
  }
  return absl::OkStatus();
}

// Median time of `launch` in milliseconds, by CUDA events around each run.
template <typename Launch>
absl::StatusOr<double> MedianMs(void* stream, int warmup, int reps, Launch launch) {
  for (int i = 0; i < warmup; ++i) PSYNC_RETURN_IF_ERROR(CudaStatus("warm-up", launch()));
  PSYNC_RETURN_IF_ERROR(CudaStatus("warm-up", cuda::StreamSynchronize(stream)));
  void* start = nullptr;
  void* stop = nullptr;
  PSYNC_RETURN_IF_ERROR(CudaStatus("cudaEventCreate", cuda::EventCreate(&start)));
  PSYNC_RETURN_IF_ERROR(CudaStatus("cudaEventCreate", cuda::EventCreate(&stop)));
  std::vector<double> times;
  absl::Status status;
  for (int i = 0; i < reps && status.ok(); ++i) {
    status.Update(CudaStatus("spin", cuda::LaunchSpin(kSpinNanoseconds, stream)));
    status.Update(CudaStatus("cudaEventRecord", cuda::EventRecord(start, stream)));
    status.Update(CudaStatus("launch", launch()));
    status.Update(CudaStatus("cudaEventRecord", cuda::EventRecord(stop, stream)));
    status.Update(CudaStatus("run", cuda::StreamSynchronize(stream)));
    float ms = 0.0f;
    status.Update(CudaStatus("cudaEventElapsedTime", cuda::EventElapsedMs(start, stop, &ms)));
    times.push_back(ms);
  }
  cuda::EventDestroy(start);
  cuda::EventDestroy(stop);
  PSYNC_RETURN_IF_ERROR(status);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double KernelBytesPerElement(ParamDtype dtype) {
  return 28.0 + (dtype == ParamDtype::kBf16 ? 2.0 : 1.0 + 1.0 / kMxfp8BlockSize);
}

absl::Status Run() {
  std::vector<int64_t> sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(s, &n) || n <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--sizes: '", s, "' is not a count > 0"));
    }
    sizes.push_back(n);
  }
  const int reps = std::max(1, absl::GetFlag(FLAGS_reps));
  const int warmup = std::max(0, absl::GetFlag(FLAGS_warmup));
  uint32_t seed = absl::GetFlag(FLAGS_seed);
  if (seed == 0) seed = std::random_device()();

  absl::StatusOr<std::unique_ptr<ComputeBackend>> gpu = NewCudaBackend(0);
  PSYNC_RETURN_IF_ERROR(gpu.status());
  char device[256] = "";
  cuda::DescribeDevice(0, device, sizeof(device));
  std::printf("device: %s\n", device);

  for (ParamDtype dtype : {ParamDtype::kBf16, ParamDtype::kMxfp8}) {
    const absl::Status check =
        CheckAgainstCpu(**gpu, dtype, absl::GetFlag(FLAGS_check_elements), seed);
    std::printf("check %-5s vs cpu backend (%lld elements, seed %u): %s\n",
                std::string(ParamDtypeName(dtype)).c_str(),
                static_cast<long long>(absl::GetFlag(FLAGS_check_elements)), seed,
                check.ok() ? "identical" : check.ToString().c_str());
    if (!check.ok()) return check;
  }

  void* stream = nullptr;
  PSYNC_RETURN_IF_ERROR(CudaStatus("cudaStreamCreate", cuda::StreamCreate(&stream)));
  std::printf("\n%-6s %12s %12s %12s %12s %12s %9s\n", "dtype", "elements", "kernel us",
              "bytes moved", "kernel GB/s", "memcpy GB/s", "vs memcpy");
  for (int64_t n : sizes) {
    // Optimizer state from the synthetic generator (a realistic mix of values), moments zero.
    // The memcpy moves about as many bytes as the kernel: 16n read and 16n written.
    const int64_t copy_bytes = 16 * n;
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> p = (*gpu)->Allocate(n * 4),
                                                  g = (*gpu)->Allocate(n * 4),
                                                  m = (*gpu)->Allocate(n * 4),
                                                  v = (*gpu)->Allocate(n * 4),
                                                  staged = (*gpu)->Allocate(2 * n),
                                                  copy_src = (*gpu)->Allocate(copy_bytes),
                                                  copy_dst = (*gpu)->Allocate(copy_bytes);
    for (auto* b : {&p, &g, &m, &v, &staged, &copy_src, &copy_dst}) {
      PSYNC_RETURN_IF_ERROR(b->status());
    }
    PSYNC_RETURN_IF_ERROR((*gpu)->FillSynthetic(1, 1, 0, 0, (*p)->As<float>()));
    PSYNC_RETURN_IF_ERROR((*gpu)->FillSynthetic(2, 1, 0, 0, (*g)->As<float>()));

    absl::StatusOr<double> copy_ms = MedianMs(stream, warmup, reps, [&] {
      return cuda::MemcpyDeviceToDeviceAsync((*copy_dst)->bytes().data(),
                                             (*copy_src)->bytes().data(), copy_bytes, stream);
    });
    PSYNC_RETURN_IF_ERROR(copy_ms.status());
    const double copy_gbps = 2.0 * copy_bytes / (*copy_ms * 1e-3) / 1e9;

    for (ParamDtype dtype : {ParamDtype::kBf16, ParamDtype::kMxfp8}) {
      int64_t step = 1;
      AdamParams hp;
      hp.weight_decay = 0.1f;
      absl::StatusOr<double> kernel_ms = MedianMs(stream, warmup, reps, [&] {
        return cuda::LaunchAdamStage(MakeAdamConstants(hp, step++), dtype, (*p)->As<float>().data(),
                                     (*g)->As<float>().data(), (*m)->As<float>().data(),
                                     (*v)->As<float>().data(), (*staged)->bytes().data(), n,
                                     stream);
      });
      PSYNC_RETURN_IF_ERROR(kernel_ms.status());
      const double bytes = KernelBytesPerElement(dtype) * n;
      const double kernel_gbps = bytes / (*kernel_ms * 1e-3) / 1e9;
      std::printf("%-6s %12lld %12.1f %12.3e %12.1f %12.1f %8.1f%%\n",
                  std::string(ParamDtypeName(dtype)).c_str(), static_cast<long long>(n),
                  *kernel_ms * 1e3, bytes, kernel_gbps, copy_gbps, 100.0 * kernel_gbps / copy_gbps);
    }
  }
  cuda::StreamDestroy(stream);
  return absl::OkStatus();
}

}  // namespace
}  // namespace worker
}  // namespace psync

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = psync::worker::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "compute_bench_cuda: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
