// Health status: what the standard gRPC health service (grpc.health.v1.Health, turned on by
// StartRankServer) answers for a psync server, the coordinator or psync-agent.
//
// SetServing(server, true) makes Check answer SERVING for "" (the server as a whole) and for each
// service in kHealthServices; SetServing(server, false) makes it NOT_SERVING for all of them (a
// server that drains: Kubernetes' readiness probe fails and the Service stops routing to it, and
// open Watch calls see the change). Any other name answers NOT_FOUND. Nothing when the server has
// no health service. Thread-safe (the health service locks).
#ifndef PSYNC_SERVE_HEALTH_STATUS_H_
#define PSYNC_SERVE_HEALTH_STATUS_H_

#include <array>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"

namespace psync::serve {

// The names a health check may ask about: the whole server and the psync.v1 service that ranks,
// agents and psyncctl call (the coordinator and psync-agent both serve it).
inline constexpr std::array<absl::string_view, 2> kHealthServices = {"", "psync.v1.Coordinator"};

void SetServing(grpc::Server* server, bool serving);

// Starts a plaintext gRPC server on `listen` with only the health service, SERVING for the names
// above: Kubernetes' gRPC probes cannot speak TLS, so a TLS coordinator answers them here. The
// bound port goes to *port. UNAVAILABLE naming `listen` when it cannot be bound.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(const std::string& listen,
                                                                int* port);

}  // namespace psync::serve

#endif  // PSYNC_SERVE_HEALTH_STATUS_H_
