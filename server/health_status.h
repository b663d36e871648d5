// Health status: what the standard gRPC health service (grpc.health.v1.Health, turned on by
// StartRankServer) answers for a psync server, the coordinator or psync-agent.
//
// SetServing(server, true) makes Check answer SERVING for "" (the server as a whole) and for each
// service in kHealthServices; SetServing(server, false) makes it NOT_SERVING for all of them (a
// server that drains: Kubernetes' readiness probe fails and the Service stops routing to it, and
// open Watch calls see the change). Any other name answers NOT_FOUND. Nothing when the server has
// no health service. Thread-safe (the health service locks).
#ifndef PSYNC_SERVER_HEALTH_STATUS_H_
#define PSYNC_SERVER_HEALTH_STATUS_H_

#include <array>

#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"

namespace psync::server {

// The names a health check may ask about: the whole server and the psync.v1 service that ranks,
// agents and psyncctl call (the coordinator and psync-agent both serve it).
inline constexpr std::array<absl::string_view, 2> kHealthServices = {"", "psync.v1.Coordinator"};

void SetServing(grpc::Server* server, bool serving);

}  // namespace psync::server

#endif  // PSYNC_SERVER_HEALTH_STATUS_H_
