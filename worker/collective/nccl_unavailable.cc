// The build has no CUDA: the NCCL backend is absent and says how to get it.
#include "absl/status/status.h"
#include "worker/collective/nccl_backend.h"

namespace psync {
namespace worker {

bool NcclBackendBuiltIn() { return false; }

absl::StatusOr<std::unique_ptr<CollectiveFactory>> MakeNcclBackendFactory() {
  return absl::UnimplementedError(
      "collective backend \"nccl\": built without CUDA; rebuild with "
      "--config=cuda");
}

}  // namespace worker
}  // namespace psync
