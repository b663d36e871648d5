// ComputeBackend: the numeric work of one training rank's DistOpt, on the CPU or on a GPU.
//
// What. Per model chunk the worker keeps a param buffer that reuses the grad buffer, and each rank
// owns one shard of it. A step of the rank's DistOpt is AdamStepAndStage(): AdamW on the fp32
// main-param shard (adam_update.h), then the updated shard is staged into the rank's region of the
// param buffer as bf16 or MXFP8 (formats.h). The chunk's param sync all-gathers the buffer, then
// DequantizeCopy()s the gathered regions into the fp32 model weights and Zero()es the shared
// buffer. FillSynthetic() produces the synthetic model's gradients (synthetic.h).
//
// Memory. Every span given to an operation must lie inside memory returned by this backend's
// Allocate(): host memory for the CPU backend (which also accepts any other host memory), device
// memory for the CUDA backend (which rejects other pointers with INVALID_ARGUMENT). Move data in
// and out with CopyFromHost() / CopyToHost(). The spans of one call must not overlap.
//
// Completion. When an operation returns, its work is finished and its results are visible to any
// later reader: another backend call, a collective on the same memory, a host copy.
//
// Errors. Arguments are checked before anything is written, by this interface for every backend
// (backend_checks.h): on INVALID_ARGUMENT every output is unchanged. INTERNAL reports a device
// failure (e.g. a faulting kernel); the outputs are then unspecified and the backend should be
// discarded. RESOURCE_EXHAUSTED: Allocate() is out of memory.
//
// Thread-safety. A backend may be called from several threads at once, provided concurrent calls
// touch disjoint memory. Results are deterministic: the same inputs give the same bytes, and the
// CPU and CUDA backends give the same bytes as each other (except NaN payloads: both produce NaN
// in the same places, but the payload bits of an fp32 or bf16 NaN may differ).
//
// Ownership. The caller owns the backend and every DeviceBuffer. Destroying a DeviceBuffer frees
// its memory; buffers must be destroyed before the backend that allocated them.

#ifndef PSYNC_WORKER_COMPUTE_COMPUTE_BACKEND_H_
#define PSYNC_WORKER_COMPUTE_COMPUTE_BACKEND_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "worker/compute/adam_update.h"
#include "worker/compute/formats.h"

namespace psync {
namespace worker {

// One allocation of backend memory (host or device, depending on the backend). Move it around by
// unique_ptr; destroying it frees the memory.
class DeviceBuffer {
 public:
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  virtual ~DeviceBuffer() = default;

  // The whole allocation. The address is 256-byte aligned. Only the CPU backend's memory may be
  // dereferenced by the caller; pass these spans (or sub-spans) to the backend that made them.
  absl::Span<uint8_t> bytes() const { return bytes_; }
  int64_t size_bytes() const { return static_cast<int64_t>(bytes_.size()); }

  // The allocation viewed as size_bytes() / sizeof(T) elements of T.
  template <typename T>
  absl::Span<T> As() const {
    return absl::Span<T>(reinterpret_cast<T*>(bytes_.data()), bytes_.size() / sizeof(T));
  }

 protected:
  explicit DeviceBuffer(absl::Span<uint8_t> bytes) : bytes_(bytes) {}

 private:
  const absl::Span<uint8_t> bytes_;
};

class ComputeBackend {
 public:
  ComputeBackend() = default;
  ComputeBackend(const ComputeBackend&) = delete;
  ComputeBackend& operator=(const ComputeBackend&) = delete;
  virtual ~ComputeBackend() = default;

  // A short stable name for logs and the status page: "cpu", "cuda:0".
  virtual absl::string_view Name() const = 0;

  // Allocates `num_bytes` (>= 0) of zeroed backend memory.
  // Errors: INVALID_ARGUMENT for a negative size, RESOURCE_EXHAUSTED when out of memory.
  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t num_bytes) = 0;

  // Copies host memory into backend memory and back. The two spans must have the same size.
  absl::Status CopyFromHost(absl::Span<const uint8_t> host, absl::Span<uint8_t> dst) {
    return CopyBytesFromHost(host.data(), host.size(), dst.data(), dst.size());
  }
  absl::Status CopyFromHost(absl::Span<const float> host, absl::Span<float> dst) {
    return CopyBytesFromHost(host.data(), host.size() * sizeof(float), dst.data(),
                             dst.size() * sizeof(float));
  }
  absl::Status CopyToHost(absl::Span<const uint8_t> src, absl::Span<uint8_t> host) {
    return CopyBytesToHost(src.data(), src.size(), host.data(), host.size());
  }
  absl::Status CopyToHost(absl::Span<const float> src, absl::Span<float> host) {
    return CopyBytesToHost(src.data(), src.size() * sizeof(float), host.data(),
                           host.size() * sizeof(float));
  }

  // One DistOpt step of a shard of n elements, fused: AdamW (adam_update.h) updates main_param,
  // exp_avg and exp_avg_sq in place from grad, then the updated main_param is encoded into
  // `staged` as `dtype` (formats.h), exactly as EncodeStaged() would.
  // Requires: step >= 1 (1-based); hp within the ranges in adam_update.h; main_param, grad,
  // exp_avg and exp_avg_sq of equal size n; staged.size() == StagedBytes(dtype, n) and, for bf16,
  // staged 2-byte aligned; no two spans overlap. Otherwise INVALID_ARGUMENT, nothing written.
  absl::Status AdamStepAndStage(const AdamParams& hp, int64_t step, absl::Span<float> main_param,
                                absl::Span<const float> grad, absl::Span<float> exp_avg,
                                absl::Span<float> exp_avg_sq, ParamDtype dtype,
                                absl::Span<uint8_t> staged);

  // Decodes a staged (gathered) region into fp32 weights, exactly as DecodeStaged() would.
  // Requires staged.size() == StagedBytes(dtype, weights.size()) (bf16: staged 2-byte aligned)
  // and no overlap; otherwise INVALID_ARGUMENT, nothing written.
  absl::Status DequantizeCopy(ParamDtype dtype, absl::Span<const uint8_t> staged,
                              absl::Span<float> weights);

  // Sets every byte of `region` to zero (the shared param/grad buffer after a param sync).
  virtual absl::Status Zero(absl::Span<uint8_t> region) = 0;

  // out[i] = SyntheticGradient(seed, step, rank, first_index + i) (synthetic.h).
  // Requires first_index >= 0; otherwise INVALID_ARGUMENT, nothing written.
  absl::Status FillSynthetic(uint64_t seed, int64_t step, int64_t rank, int64_t first_index,
                             absl::Span<float> out);

 private:
  // The copies; the sizes are in bytes and must be equal (INVALID_ARGUMENT otherwise).
  absl::Status CopyBytesFromHost(const void* host, size_t host_bytes, void* dst, size_t dst_bytes);
  absl::Status CopyBytesToHost(const void* src, size_t src_bytes, void* host, size_t host_bytes);

  // The backend's operations, called only with arguments that passed the checks above.
  virtual absl::Status DoAdamStepAndStage(const AdamParams& hp, int64_t step,
                                          absl::Span<float> main_param,
                                          absl::Span<const float> grad, absl::Span<float> exp_avg,
                                          absl::Span<float> exp_avg_sq, ParamDtype dtype,
                                          absl::Span<uint8_t> staged) = 0;
  virtual absl::Status DoDequantizeCopy(ParamDtype dtype, absl::Span<const uint8_t> staged,
                                        absl::Span<float> weights) = 0;
  virtual absl::Status DoFillSynthetic(uint64_t seed, int64_t step, int64_t rank,
                                       int64_t first_index, absl::Span<float> out) = 0;
  virtual absl::Status DoCopyBytesFromHost(const void* host, size_t host_bytes, void* dst) = 0;
  virtual absl::Status DoCopyBytesToHost(const void* src, size_t src_bytes, void* host) = 0;
};

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COMPUTE_COMPUTE_BACKEND_H_
