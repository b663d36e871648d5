#include "worker/compute/cuda_backend.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/compute/cuda_kernels.h"
#include "worker/compute/synthetic.h"

namespace psync {
namespace worker {
namespace {

absl::Status CudaError(absl::string_view what, int error) {
  return absl::InternalError(absl::StrCat(what, ": ", cuda::ErrorString(error)));
}

class CudaBuffer final : public DeviceBuffer {
 public:
  explicit CudaBuffer(absl::Span<uint8_t> bytes) : DeviceBuffer(bytes) {}
  // cudaFree synchronizes the device, so no kernel still uses the memory.
  ~CudaBuffer() override {
    if (bytes().data() != nullptr) cuda::Free(bytes().data());
  }
};

class CudaBackend final : public ComputeBackend {
 public:
  CudaBackend(int device, void* stream)
      : device_(device), stream_(stream), name_(absl::StrCat("cuda:", device)) {}
  ~CudaBackend() override {
    cuda::SetDevice(device_);
    cuda::StreamDestroy(stream_);
  }

  absl::string_view Name() const override { return name_; }

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t num_bytes) override {
    if (num_bytes < 0) {
      return absl::InvalidArgumentError(absl::StrCat("num_bytes is ", num_bytes, "; must be >= 0"));
    }
    if (absl::Status s = MakeCurrent(); !s.ok()) return s;
    void* data = nullptr;
    if (num_bytes > 0) {
      // cudaMalloc returns 256-byte aligned memory.
      if (const int e = cuda::Malloc(&data, static_cast<size_t>(num_bytes)); e != 0) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "cannot allocate ", num_bytes, " bytes on ", name_, ": ", cuda::ErrorString(e)));
      }
      auto buffer = std::make_unique<CudaBuffer>(
          absl::Span<uint8_t>(static_cast<uint8_t*>(data), static_cast<size_t>(num_bytes)));
      if (const int e = cuda::MemsetZeroAsync(data, num_bytes, stream_); e != 0) {
        return CudaError("zeroing a new allocation", e);
      }
      if (absl::Status s = Finish("zeroing a new allocation"); !s.ok()) return s;
      return std::unique_ptr<DeviceBuffer>(std::move(buffer));
    }
    return std::unique_ptr<DeviceBuffer>(std::make_unique<CudaBuffer>(absl::Span<uint8_t>()));
  }

  absl::Status DoAdamStepAndStage(const AdamParams& hp, int64_t step, absl::Span<float> main_param,
                                  absl::Span<const float> grad, absl::Span<float> exp_avg,
                                  absl::Span<float> exp_avg_sq, ParamDtype dtype,
                                  absl::Span<uint8_t> staged) override {
    if (main_param.empty()) return absl::OkStatus();
    if (absl::Status s = MakeCurrent(); !s.ok()) return s;
    const size_t float_bytes = main_param.size() * sizeof(float);
    if (absl::Status s = CheckOnDevice({{"main_param", main_param.data(), float_bytes},
                                        {"grad", grad.data(), float_bytes},
                                        {"exp_avg", exp_avg.data(), float_bytes},
                                        {"exp_avg_sq", exp_avg_sq.data(), float_bytes},
                                        {"staged", staged.data(), staged.size()}});
        !s.ok()) {
      return s;
    }
    const int e = cuda::LaunchAdamStage(MakeAdamConstants(hp, step), dtype, main_param.data(),
                                        grad.data(), exp_avg.data(), exp_avg_sq.data(),
                                        staged.data(), main_param.size(), stream_);
    if (e != 0) return CudaError("launching the Adam+stage kernel", e);
    return Finish("the Adam+stage kernel");
  }

  absl::Status DoDequantizeCopy(ParamDtype dtype, absl::Span<const uint8_t> staged,
                                absl::Span<float> weights) override {
    if (weights.empty()) return absl::OkStatus();
    if (absl::Status s = MakeCurrent(); !s.ok()) return s;
    if (absl::Status s =
            CheckOnDevice({{"staged", staged.data(), staged.size()},
                           {"weights", weights.data(), weights.size() * sizeof(float)}});
        !s.ok()) {
      return s;
    }
    const int e =
        cuda::LaunchDequantize(dtype, staged.data(), weights.data(), weights.size(), stream_);
    if (e != 0) return CudaError("launching the dequantize kernel", e);
    return Finish("the dequantize kernel");
  }

  absl::Status Zero(absl::Span<uint8_t> region) override {
    if (region.empty()) return absl::OkStatus();
    if (absl::Status s = MakeCurrent(); !s.ok()) return s;
    if (absl::Status s = CheckOnDevice({{"region", region.data(), region.size()}}); !s.ok())
      return s;
    if (const int e = cuda::MemsetZeroAsync(region.data(), region.size(), stream_); e != 0) {
      return CudaError("cudaMemsetAsync", e);
    }
    return Finish("cudaMemsetAsync");
  }

  absl::Status DoFillSynthetic(uint64_t seed, int64_t step, int64_t rank, int64_t first_index,
                               absl::Span<float> out) override {
    if (out.empty()) return absl::OkStatus();
    if (absl::Status s = MakeCurrent(); !s.ok()) return s;
    if (absl::Status s = CheckOnDevice({{"out", out.data(), out.size() * sizeof(float)}}); !s.ok())
      return s;
    const int e = cuda::LaunchFillSynthetic(SyntheticStreamKey(seed, step, rank), first_index,
                                            out.data(), out.size(), stream_);
    if (e != 0) return CudaError("launching the synthetic-value kernel", e);
    return Finish("the synthetic-value kernel");
  }

 private:
  absl::Status DoCopyBytesFromHost(const void* host, size_t host_bytes, void* dst) override {
    if (host_bytes == 0) return absl::OkStatus();
    if (absl::Status s = MakeCurrent(); !s.ok()) return s;
    if (absl::Status s = CheckOnDevice({{"copy destination", dst, host_bytes}}); !s.ok()) return s;
    if (const int e = cuda::MemcpyHostToDeviceAsync(dst, host, host_bytes, stream_); e != 0) {
      return CudaError("cudaMemcpyAsync host to device", e);
    }
    return Finish("cudaMemcpyAsync host to device");
  }

  absl::Status DoCopyBytesToHost(const void* src, size_t src_bytes, void* host) override {
    if (src_bytes == 0) return absl::OkStatus();
    if (absl::Status s = MakeCurrent(); !s.ok()) return s;
    if (absl::Status s = CheckOnDevice({{"copy source", src, src_bytes}}); !s.ok()) return s;
    if (const int e = cuda::MemcpyDeviceToHostAsync(host, src, src_bytes, stream_); e != 0) {
      return CudaError("cudaMemcpyAsync device to host", e);
    }
    return Finish("cudaMemcpyAsync device to host");
  }

  struct NamedRegion {
    absl::string_view name;
    const void* data;
    size_t bytes;  // > 0
  };

  absl::Status MakeCurrent() const {
    if (const int e = cuda::SetDevice(device_); e != 0) return CudaError("cudaSetDevice", e);
    return absl::OkStatus();
  }

  // Rejects pointers the kernels cannot use before anything is launched: a host pointer would
  // fault the kernel and poison the whole CUDA context.
  // Both ends of each region are checked.
  absl::Status CheckOnDevice(std::initializer_list<NamedRegion> regions) const {
    for (const NamedRegion& r : regions) {
      const uint8_t* first = static_cast<const uint8_t*>(r.data);
      bool first_on_device = false;
      bool last_on_device = false;
      cuda::IsDevicePointer(first, device_, &first_on_device);
      cuda::IsDevicePointer(first + r.bytes - 1, device_, &last_on_device);
      if (!first_on_device || !last_on_device) {
        return absl::InvalidArgumentError(absl::StrCat(r.name, " is not device memory of ", name_,
                                                       "; allocate it with this backend"));
      }
    }
    return absl::OkStatus();
  }

  // Waits for the stream; reports a kernel fault of `what`.
  absl::Status Finish(absl::string_view what) const {
    if (const int e = cuda::StreamSynchronize(stream_); e != 0) return CudaError(what, e);
    return absl::OkStatus();
  }

  // Constant after construction.
  const int device_;
  void* const stream_;  // cudaStream_t, owned.
  const std::string name_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ComputeBackend>> NewCudaBackend(int device) {
  if (device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("GPU index is ", device, "; must be >= 0"));
  }
  int count = 0;
  if (const int e = cuda::GetDeviceCount(&count); e != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no usable GPU for the cuda backend: ", cuda::ErrorString(e)));
  }
  if (device >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU index ", device, " is out of range: this machine has ", count, " GPU(s)"));
  }
  if (const int e = cuda::SetDevice(device); e != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot use GPU ", device, ": ", cuda::ErrorString(e)));
  }
  void* stream = nullptr;
  if (const int e = cuda::StreamCreate(&stream); e != 0) {
    return CudaError("cudaStreamCreate", e);
  }
  return std::unique_ptr<ComputeBackend>(std::make_unique<CudaBackend>(device, stream));
}

}  // namespace worker
}  // namespace psync
