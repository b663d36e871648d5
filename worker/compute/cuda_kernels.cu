// Kernels and CUDA runtime wrappers of the CUDA backend; see cuda_kernels.h.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "worker/compute/adam_update.h"
#include "worker/compute/cuda_kernels.h"
#include "worker/compute/scalar_formats.h"
#include "worker/compute/synthetic.h"

namespace psync {
namespace worker {
namespace cuda {
namespace {

constexpr int kThreadsPerBlock = 256;
constexpr int kWarpSize = 32;
constexpr int64_t kMaxBlocks = 1 << 20;  // Grid-stride loops cover anything larger.

int BlocksFor(int64_t work_items, int64_t items_per_block) {
  return static_cast<int>(
      std::min<int64_t>((work_items + items_per_block - 1) / items_per_block, kMaxBlocks));
}

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Launch errors are read with cudaGetLastError, which also returns a non-sticky error left by any
// earlier runtime call on this thread (a failed cudaMalloc, say). Drop that before launching so a
// launch reports only its own failure; a sticky error makes the launch itself fail anyway.
void ClearStaleError() { cudaGetLastError(); }

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

__global__ void AdamStageBf16Kernel(AdamConstants c, float* __restrict__ main_param,
                                    const float* __restrict__ grad, float* __restrict__ exp_avg,
                                    float* __restrict__ exp_avg_sq, uint16_t* __restrict__ staged,
                                    int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float m = exp_avg[i];
    float v = exp_avg_sq[i];
    const float p = AdamUpdate(c, main_param[i], grad[i], &m, &v);
    main_param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    staged[i] = EncodeBf16(p);
  }
}

// Four elements per thread with 16-byte loads and stores (8-byte for the staged bf16): more bytes
// in flight per thread, which is what a memory-bound kernel needs. Requires every pointer aligned
// to its vector and n % 4 == 0 (LaunchAdamStage falls back to the scalar kernel otherwise).
__global__ void AdamStageBf16x4Kernel(AdamConstants c, float4* __restrict__ main_param,
                                      const float4* __restrict__ grad, float4* __restrict__ exp_avg,
                                      float4* __restrict__ exp_avg_sq, ushort4* __restrict__ staged,
                                      int64_t n4) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += stride) {
    float4 p = main_param[i];
    const float4 g = grad[i];
    float4 m = exp_avg[i];
    float4 v = exp_avg_sq[i];
    p.x = AdamUpdate(c, p.x, g.x, &m.x, &v.x);
    p.y = AdamUpdate(c, p.y, g.y, &m.y, &v.y);
    p.z = AdamUpdate(c, p.z, g.z, &m.z, &v.z);
    p.w = AdamUpdate(c, p.w, g.w, &m.w, &v.w);
    main_param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    staged[i] = make_ushort4(EncodeBf16(p.x), EncodeBf16(p.y), EncodeBf16(p.z), EncodeBf16(p.w));
  }
}

// MXFP8 with four elements per lane: 8 lanes cover one 32-element block, a warp four blocks. The
// block max is reduced over the 8 lanes of the block with xor-shuffles. Requires n % 128 == 0 and
// aligned pointers (16 bytes for the fp32 arrays, 4 for the elements).
__global__ void AdamStageMxfp8x4Kernel(AdamConstants c, float4* __restrict__ main_param,
                                       const float4* __restrict__ grad,
                                       float4* __restrict__ exp_avg,
                                       float4* __restrict__ exp_avg_sq,
                                       uchar4* __restrict__ elements, uint8_t* __restrict__ scales,
                                       int64_t n4) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += stride) {
    float4 p = main_param[i];
    const float4 g = grad[i];
    float4 m = exp_avg[i];
    float4 v = exp_avg_sq[i];
    p.x = AdamUpdate(c, p.x, g.x, &m.x, &v.x);
    p.y = AdamUpdate(c, p.y, g.y, &m.y, &v.y);
    p.z = AdamUpdate(c, p.z, g.z, &m.z, &v.z);
    p.w = AdamUpdate(c, p.w, g.w, &m.w, &v.w);
    main_param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    uint32_t amax = max(max(AbsBits(p.x), AbsBits(p.y)), max(AbsBits(p.z), AbsBits(p.w)));
    // n4 % 32 == 0, so every lane of the warp is in the loop together.
    for (int offset = 4; offset > 0; offset /= 2) {
      amax = max(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, offset));
    }
    const uint8_t scale = Mxfp8ScaleFromAmaxBits(amax);
    elements[i] = make_uchar4(EncodeMxfp8Element(p.x, scale), EncodeMxfp8Element(p.y, scale),
                              EncodeMxfp8Element(p.z, scale), EncodeMxfp8Element(p.w, scale));
    if ((threadIdx.x & 7) == 0) scales[i / 8] = scale;
  }
}

// One warp per 32-element MXFP8 block; every lane of a warp runs the same loop iterations, so the
// full-mask warp reduction is always legal (lanes past n contribute 0).
__global__ void AdamStageMxfp8Kernel(AdamConstants c, float* __restrict__ main_param,
                                     const float* __restrict__ grad, float* __restrict__ exp_avg,
                                     float* __restrict__ exp_avg_sq, uint8_t* __restrict__ elements,
                                     uint8_t* __restrict__ scales, int64_t n) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t num_blocks = Mxfp8NumBlocks(n);
  const int64_t warp_stride = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarpSize);
  for (int64_t block = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
       block < num_blocks; block += warp_stride) {
    const int64_t i = block * kMxfp8BlockSize + lane;
    const bool active = i < n;
    float p = 0.0f;
    if (active) {
      float m = exp_avg[i];
      float v = exp_avg_sq[i];
      p = AdamUpdate(c, main_param[i], grad[i], &m, &v);
      main_param[i] = p;
      exp_avg[i] = m;
      exp_avg_sq[i] = v;
    }
    const uint32_t amax_bits = __reduce_max_sync(0xFFFFFFFFu, active ? AbsBits(p) : 0u);
    const uint8_t scale = Mxfp8ScaleFromAmaxBits(amax_bits);
    if (active) elements[i] = EncodeMxfp8Element(p, scale);
    if (lane == 0) scales[block] = scale;
  }
}

__global__ void DequantizeBf16Kernel(const uint16_t* __restrict__ staged,
                                     float* __restrict__ weights, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    weights[i] = DecodeBf16(staged[i]);
  }
}

__global__ void DequantizeMxfp8Kernel(const uint8_t* __restrict__ elements,
                                      const uint8_t* __restrict__ scales,
                                      float* __restrict__ weights, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    weights[i] = DecodeMxfp8Element(elements[i], scales[i / kMxfp8BlockSize]);
  }
}

__global__ void FillSyntheticKernel(uint64_t stream_key, int64_t first_index,
                                    float* __restrict__ out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = SyntheticValue(stream_key, first_index + i);
  }
}

__device__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void SpinKernel(int64_t nanoseconds) {
  const uint64_t start = GlobalTimerNs();
  while (GlobalTimerNs() - start < static_cast<uint64_t>(nanoseconds)) {
  }
}

}  // namespace

const char* ErrorString(int error) {
  static thread_local char text[256];
  const cudaError_t e = static_cast<cudaError_t>(error);
  std::snprintf(text, sizeof(text), "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
  return text;
}

int GetDeviceCount(int* count) { return cudaGetDeviceCount(count); }

int SetDevice(int device) { return cudaSetDevice(device); }

int DescribeDevice(int device, char* text, size_t text_size) {
  cudaDeviceProp prop;
  const cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) return e;
  std::snprintf(text, text_size, "%s (sm_%d%d, %d SMs)", prop.name, prop.major, prop.minor,
                prop.multiProcessorCount);
  return cudaSuccess;
}

int Malloc(void** ptr, size_t bytes) { return cudaMalloc(ptr, bytes); }

int Free(void* ptr) { return cudaFree(ptr); }

int StreamCreate(void** stream) {
  cudaStream_t s = nullptr;
  const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  *stream = s;
  return e;
}

int StreamDestroy(void* stream) { return cudaStreamDestroy(AsStream(stream)); }

int StreamSynchronize(void* stream) { return cudaStreamSynchronize(AsStream(stream)); }

int MemcpyHostToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, AsStream(stream));
}

int MemcpyDeviceToHostAsync(void* dst, const void* src, size_t bytes, void* stream) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, AsStream(stream));
}

int MemcpyDeviceToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, AsStream(stream));
}

int MemsetZeroAsync(void* dst, size_t bytes, void* stream) {
  return cudaMemsetAsync(dst, 0, bytes, AsStream(stream));
}

int IsDevicePointer(const void* ptr, int device, bool* on_device) {
  cudaPointerAttributes attributes;
  const cudaError_t e = cudaPointerGetAttributes(&attributes, ptr);
  if (e != cudaSuccess) {
    ClearStaleError();
    *on_device = false;
    return e;
  }
  *on_device = attributes.type == cudaMemoryTypeManaged ||
               (attributes.type == cudaMemoryTypeDevice && attributes.device == device);
  return cudaSuccess;
}

int LaunchAdamStage(const AdamConstants& constants, ParamDtype dtype, float* main_param,
                    const float* grad, float* exp_avg, float* exp_avg_sq, uint8_t* staged,
                    int64_t n, void* stream) {
  if (n == 0) return cudaSuccess;
  ClearStaleError();
  const bool fp32_aligned = Aligned(main_param, 16) && Aligned(grad, 16) && Aligned(exp_avg, 16) &&
                            Aligned(exp_avg_sq, 16);
  if (dtype == ParamDtype::kBf16 && fp32_aligned && n % 4 == 0 && Aligned(staged, 8)) {
    const int64_t n4 = n / 4;
    AdamStageBf16x4Kernel<<<BlocksFor(n4, kThreadsPerBlock), kThreadsPerBlock, 0,
                            AsStream(stream)>>>(
        constants, reinterpret_cast<float4*>(main_param), reinterpret_cast<const float4*>(grad),
        reinterpret_cast<float4*>(exp_avg), reinterpret_cast<float4*>(exp_avg_sq),
        reinterpret_cast<ushort4*>(staged), n4);
  } else if (dtype == ParamDtype::kBf16) {
    AdamStageBf16Kernel<<<BlocksFor(n, kThreadsPerBlock), kThreadsPerBlock, 0, AsStream(stream)>>>(
        constants, main_param, grad, exp_avg, exp_avg_sq, reinterpret_cast<uint16_t*>(staged), n);
  } else if (fp32_aligned && n % 128 == 0 && Aligned(staged, 4)) {
    const int64_t n4 = n / 4;
    AdamStageMxfp8x4Kernel<<<BlocksFor(n4, kThreadsPerBlock), kThreadsPerBlock, 0,
                             AsStream(stream)>>>(
        constants, reinterpret_cast<float4*>(main_param), reinterpret_cast<const float4*>(grad),
        reinterpret_cast<float4*>(exp_avg), reinterpret_cast<float4*>(exp_avg_sq),
        reinterpret_cast<uchar4*>(staged), staged + n, n4);
  } else {
    const int64_t warps_per_block = kThreadsPerBlock / kWarpSize;
    AdamStageMxfp8Kernel<<<BlocksFor(Mxfp8NumBlocks(n), warps_per_block), kThreadsPerBlock, 0,
                           AsStream(stream)>>>(constants, main_param, grad, exp_avg, exp_avg_sq,
                                               staged, staged + n, n);
  }
  return cudaGetLastError();
}

int LaunchDequantize(ParamDtype dtype, const uint8_t* staged, float* weights, int64_t n,
                     void* stream) {
  if (n == 0) return cudaSuccess;
  ClearStaleError();
  if (dtype == ParamDtype::kBf16) {
    DequantizeBf16Kernel<<<BlocksFor(n, kThreadsPerBlock), kThreadsPerBlock, 0, AsStream(stream)>>>(
        reinterpret_cast<const uint16_t*>(staged), weights, n);
  } else {
    DequantizeMxfp8Kernel<<<BlocksFor(n, kThreadsPerBlock), kThreadsPerBlock, 0,
                            AsStream(stream)>>>(staged, staged + n, weights, n);
  }
  return cudaGetLastError();
}

int LaunchFillSynthetic(uint64_t stream_key, int64_t first_index, float* out, int64_t n,
                        void* stream) {
  if (n == 0) return cudaSuccess;
  ClearStaleError();
  FillSyntheticKernel<<<BlocksFor(n, kThreadsPerBlock), kThreadsPerBlock, 0, AsStream(stream)>>>(
      stream_key, first_index, out, n);
  return cudaGetLastError();
}

int EventCreate(void** event) {
  cudaEvent_t e = nullptr;
  const cudaError_t error = cudaEventCreate(&e);
  *event = e;
  return error;
}

int EventDestroy(void* event) { return cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

int EventRecord(void* event, void* stream) {
  return cudaEventRecord(static_cast<cudaEvent_t>(event), AsStream(stream));
}

int EventElapsedMs(void* start, void* stop, float* ms) {
  return cudaEventElapsedTime(ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(stop));
}

int LaunchSpin(int64_t nanoseconds, void* stream) {
  ClearStaleError();
  SpinKernel<<<1, 1, 0, AsStream(stream)>>>(nanoseconds);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace worker
}  // namespace psync
