// Whether this build has the NCCL backend, and its factory when it does, so
// that callers choose backends without #ifdef. Two implementations exist:
// nccl_available.cc (built with --define=cuda=1, i.e. --config=cuda) and
// nccl_unavailable.cc (every other build); BUILD picks one with select().
//
// Thread-safety: both functions may be called from any thread.
#ifndef PSYNC_WORKER_COLLECTIVE_NCCL_BACKEND_H_
#define PSYNC_WORKER_COLLECTIVE_NCCL_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/collective/collective.h"

namespace psync {
namespace worker {

// True when the NCCL backend is compiled in.
bool NcclBackendBuiltIn();

// A factory with default NcclOptions, or UNIMPLEMENTED when the build has no
// CUDA. Creating the factory touches no GPU.
absl::StatusOr<std::unique_ptr<CollectiveFactory>> MakeNcclBackendFactory();

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COLLECTIVE_NCCL_BACKEND_H_
