#include "worker/compute/backend_registry.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "worker/compute/cpu_backend.h"
#include "worker/compute/cuda_factory.h"

namespace psync {
namespace worker {

absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeComputeBackend(absl::string_view name) {
  if (name == "cpu") return NewCpuBackend();
  if (name == "cuda") return internal::MakeCudaBackend(0);
  if (absl::StartsWith(name, "cuda:")) {
    int device = -1;
    if (!absl::SimpleAtoi(name.substr(5), &device) || device < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("compute backend '", name, "': the GPU index must be an integer >= 0"));
    }
    return internal::MakeCudaBackend(device);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown compute backend '", name, "'; expected one of: cpu, cuda, cuda:<gpu index>"));
}

std::vector<std::string> CompiledComputeBackends() {
  std::vector<std::string> names = {"cpu"};
  if (internal::CudaCompiledIn()) names.push_back("cuda");
  return names;
}

}  // namespace worker
}  // namespace psync
