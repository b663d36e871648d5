// The CUDA seam of a build with --define=cuda=1.
#include "worker/compute/cuda_backend.h"
#include "worker/compute/cuda_factory.h"

namespace psync {
namespace worker {
namespace internal {

bool CudaCompiledIn() { return true; }

absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeCudaBackend(int device) {
  return NewCudaBackend(device);
}

}  // namespace internal
}  // namespace worker
}  // namespace psync
