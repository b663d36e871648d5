// The CUDA seam of a build without --define=cuda=1.
#include "absl/status/status.h"
#include "worker/compute/cuda_factory.h"

namespace psync {
namespace worker {
namespace internal {

bool CudaCompiledIn() { return false; }

absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeCudaBackend(int /*device*/) {
  return absl::FailedPreconditionError(
      "compute backend 'cuda' is not compiled into this binary; build with --config=cuda "
      "(--define=cuda=1) on a machine with the CUDA toolkit");
}

}  // namespace internal
}  // namespace worker
}  // namespace psync
