// The link-time seam between backend_registry.cc and the optional CUDA backend.
//
// Exactly one of cuda_available.cc (built with --define=cuda=1) and cuda_unavailable.cc
// (otherwise) defines these functions; BUILD selects which. Not for use outside this folder.

#ifndef PSYNC_WORKER_COMPUTE_CUDA_FACTORY_H_
#define PSYNC_WORKER_COMPUTE_CUDA_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/compute/compute_backend.h"

namespace psync {
namespace worker {
namespace internal {

// Whether this binary contains the CUDA backend.
bool CudaCompiledIn();

// A CUDA backend on GPU `device`. FAILED_PRECONDITION when CUDA is not compiled in or the GPU is
// not usable; INVALID_ARGUMENT for a negative device.
absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeCudaBackend(int device);

}  // namespace internal
}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COMPUTE_CUDA_FACTORY_H_
