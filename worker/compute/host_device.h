// Annotations for code that compiles both as host C++ and as CUDA device code.
//
// Headers in this folder that hold the arithmetic shared by the CPU backend and the CUDA kernels
// (bit-level format conversions, the Adam element update, the synthetic value hash) mark their
// functions PSYNC_HOST_DEVICE. Under nvcc that expands to `__host__ __device__`; under a plain
// C++ compiler it expands to nothing. Such headers include only <cstdint>-level standard headers
// and never Abseil, so nvcc can compile them.

#ifndef PSYNC_WORKER_COMPUTE_HOST_DEVICE_H_
#define PSYNC_WORKER_COMPUTE_HOST_DEVICE_H_

#ifdef __CUDACC__
#define PSYNC_HOST_DEVICE __host__ __device__
#else
#define PSYNC_HOST_DEVICE
#endif

#endif  // PSYNC_WORKER_COMPUTE_HOST_DEVICE_H_
