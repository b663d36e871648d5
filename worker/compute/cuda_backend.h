// The CUDA ComputeBackend: the operations of compute_backend.h as kernels on one GPU.
//
// Memory from Allocate() is device memory (cudaMalloc); the operations accept only device or
// managed memory of the backend's GPU and answer INVALID_ARGUMENT for anything else (host
// pointers included), before launching anything. Each operation runs on the backend's own
// stream and synchronizes it before returning, so the ComputeBackend completion rule holds and
// kernel faults are reported by the call that caused them (INTERNAL). Every call makes the
// backend's GPU current on the calling thread (cudaSetDevice). Results are bit-identical to the
// CPU backend's, NaN payloads aside (same element functions, no FMA contraction). Thread-safe per
// compute_backend.h.
//
// Only built with --define=cuda=1; callers normally go through MakeComputeBackend("cuda").

#ifndef PSYNC_WORKER_COMPUTE_CUDA_BACKEND_H_
#define PSYNC_WORKER_COMPUTE_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/compute/compute_backend.h"

namespace psync {
namespace worker {

// A CUDA backend on GPU `device`, named "cuda:<device>".
// Errors: INVALID_ARGUMENT for a negative device; FAILED_PRECONDITION when the CUDA runtime finds
// no usable GPU (no driver, no device, or `device` out of range; the message has CUDA's reason);
// INTERNAL if the stream cannot be created.
absl::StatusOr<std::unique_ptr<ComputeBackend>> NewCudaBackend(int device);

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COMPUTE_CUDA_BACKEND_H_
