#include "worker/collective/collective_factory.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/collective/gloo_collective.h"
#include "worker/collective/nccl_backend.h"

namespace psync {
namespace worker {

absl::StatusOr<std::unique_ptr<CollectiveFactory>> MakeCollectiveFactory(
    absl::string_view backend, const CollectiveBackendOptions& options) {
  if (backend == "gloo") {
    GlooOptions gloo;
    gloo.hostname = options.gloo_hostname;
    gloo.interface = options.gloo_interface;
    return NewGlooCollectiveFactory(std::move(gloo));
  }
  if (backend == "nccl") return MakeNcclBackendFactory();
  return absl::InvalidArgumentError(absl::StrCat(
      "backend: \"", backend, "\" is not a collective backend; use \"gloo\" or \"nccl\""));
}

}  // namespace worker
}  // namespace psync
