// MakeComputeBackend: picks the worker's compute backend by name at start-up.
//
// Names: "cpu" (always available) and "cuda" / "cuda:N" (GPU 0 / GPU N; available when the
// binary was built with --define=cuda=1, i.e. `--config=cuda`, and the GPU is present). Callers
// need no #ifdef: a build without CUDA links a stub that reports FAILED_PRECONDITION for "cuda".
//
// Errors: INVALID_ARGUMENT for an unknown name (the message lists the known ones);
// FAILED_PRECONDITION for "cuda" when this binary has no CUDA support or no usable GPU.
// Thread-safe; each call returns a new backend owned by the caller.

#ifndef PSYNC_WORKER_COMPUTE_BACKEND_REGISTRY_H_
#define PSYNC_WORKER_COMPUTE_BACKEND_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/compute/compute_backend.h"

namespace psync {
namespace worker {

absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeComputeBackend(absl::string_view name);

// The backend kinds compiled into this binary, e.g. {"cpu"} or {"cpu", "cuda"}.
std::vector<std::string> CompiledComputeBackends();

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COMPUTE_BACKEND_REGISTRY_H_
