// The NCCL backend is compiled in (--define=cuda=1).
#include "worker/collective/nccl_backend.h"
#include "worker/collective/nccl_collective.h"

namespace psync {
namespace worker {

bool NcclBackendBuiltIn() { return true; }

absl::StatusOr<std::unique_ptr<CollectiveFactory>> MakeNcclBackendFactory() {
  return NewNcclCollectiveFactory();
}

}  // namespace worker
}  // namespace psync
