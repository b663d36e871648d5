// The CPU ComputeBackend: plain single-threaded loops over host memory.
//
// Implements the ComputeBackend contract (compute_backend.h) with the shared element functions
// of adam_update.h, scalar_formats.h and synthetic.h, so its bytes are the reference the CUDA
// backend is tested against. Any host memory is accepted, not only its own allocations.
// Thread-safe: the backend holds no mutable state.

#ifndef PSYNC_WORKER_COMPUTE_CPU_BACKEND_H_
#define PSYNC_WORKER_COMPUTE_CPU_BACKEND_H_

#include <memory>

#include "worker/compute/compute_backend.h"

namespace psync {
namespace worker {

// Returns a new CPU backend, named "cpu". Never fails.
std::unique_ptr<ComputeBackend> NewCpuBackend();

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COMPUTE_CPU_BACKEND_H_
