// C-style entry points into the nvcc-compiled part of the CUDA backend (cuda_kernels.cu).
//
// This header uses no CUDA types, so g++-compiled code (cuda_backend.cc, the benchmark) can call
// into the nvcc-compiled object: streams and events are opaque `void*` (cudaStream_t /
// cudaEvent_t), and every function returns a cudaError_t value as an int (0 = success;
// ErrorString() describes the others). Launch* functions only enqueue work on `stream` and report
// launch errors; StreamSynchronize() waits and reports execution errors. The kernels use the
// element functions of adam_update.h, scalar_formats.h and synthetic.h, so their bytes equal the
// CPU backend's. Pointers must be device (or managed) memory of the current device; counts may be
// zero. Thread-safe as the CUDA runtime is.

#ifndef PSYNC_WORKER_COMPUTE_CUDA_KERNELS_H_
#define PSYNC_WORKER_COMPUTE_CUDA_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "worker/compute/adam_update.h"
#include "worker/compute/scalar_formats.h"

namespace psync {
namespace worker {
namespace cuda {

// "cudaErrorNoDevice: no CUDA-capable device is detected" for an error code.
const char* ErrorString(int error);

int GetDeviceCount(int* count);
int SetDevice(int device);
// Writes the device's name and compute capability, e.g. "NVIDIA H200 (sm_90)".
int DescribeDevice(int device, char* text, size_t text_size);

int Malloc(void** ptr, size_t bytes);
int Free(void* ptr);
int StreamCreate(void** stream);
int StreamDestroy(void* stream);
int StreamSynchronize(void* stream);
int MemcpyHostToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream);
int MemcpyDeviceToHostAsync(void* dst, const void* src, size_t bytes, void* stream);
int MemcpyDeviceToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream);
int MemsetZeroAsync(void* dst, size_t bytes, void* stream);

// Sets *on_device to whether `ptr` is device memory of `device` or managed memory.
int IsDevicePointer(const void* ptr, int device, bool* on_device);

// Fused AdamW + stage of n elements (see ComputeBackend::AdamStepAndStage). bf16: one thread
// per element. MXFP8: one warp per 32-element block; the warp reduces the block's max |x| with
// __reduce_max_sync, lane 0 writes the scale.
int LaunchAdamStage(const AdamConstants& constants, ParamDtype dtype, float* main_param,
                    const float* grad, float* exp_avg, float* exp_avg_sq, uint8_t* staged,
                    int64_t n, void* stream);

// weights[i] = decoded staged element i, for n elements.
int LaunchDequantize(ParamDtype dtype, const uint8_t* staged, float* weights, int64_t n,
                     void* stream);

// out[i] = SyntheticValue(stream_key, first_index + i), for n elements.
int LaunchFillSynthetic(uint64_t stream_key, int64_t first_index, float* out, int64_t n,
                        void* stream);

// Events, for timing.
int EventCreate(void** event);
int EventDestroy(void* event);
int EventRecord(void* event, void* stream);
int EventElapsedMs(void* start, void* stop, float* ms);
// A kernel that busy-waits `nanoseconds` on the GPU, so that the work enqueued after it is queued
// before the GPU reaches it (timings then exclude host launch overhead).
int LaunchSpin(int64_t nanoseconds, void* stream);

}  // namespace cuda
}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COMPUTE_CUDA_KERNELS_H_
