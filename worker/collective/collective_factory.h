// MakeCollectiveFactory: picks a collective backend by name at start-up.
//
// What: "gloo" (CPU, host buffers; always available) or "nccl" (CUDA, device
// buffers; only in builds made with --config=cuda). Callers need no #ifdef:
// in a build without CUDA, "nccl" is a clear UNIMPLEMENTED status.
//
// Thread-safety: may be called from any thread; the returned factory is
// thread-safe (collective.h).
// Errors: INVALID_ARGUMENT for an unknown backend name, listing the known
// ones; UNIMPLEMENTED for "nccl" in a build without CUDA.
#ifndef PSYNC_WORKER_COLLECTIVE_COLLECTIVE_FACTORY_H_
#define PSYNC_WORKER_COLLECTIVE_COLLECTIVE_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/collective/collective.h"

namespace psync {
namespace worker {

struct CollectiveBackendOptions {
  // Gloo: the address this rank listens on and advertises to its peers.
  std::string gloo_hostname = "127.0.0.1";
  // Gloo: the network interface to listen on; when set, wins over
  // gloo_hostname. NCCL picks its interfaces itself (NCCL_SOCKET_IFNAME).
  std::string gloo_interface;
};

absl::StatusOr<std::unique_ptr<CollectiveFactory>> MakeCollectiveFactory(
    absl::string_view backend,
    const CollectiveBackendOptions& options = CollectiveBackendOptions());

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COLLECTIVE_COLLECTIVE_FACTORY_H_
