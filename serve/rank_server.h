// StartRankServer: builds and starts the gRPC server that ranks connect to, with the settings the
// coordinator and psync-agent share: the largest message accepted from a client, and HTTP/2
// keepalive that finds dead peers (a killed rank, a cut network) while permitting the ranks' own
// pings. The standard gRPC health service is on, SERVING for "" and psync.v1.Coordinator (see
// health_status.h).
//
// Returns the started server, with the port gRPC bound in *port; UNAVAILABLE naming `listen` when
// the address cannot be bound. The service is not
// owned and must outlive the server. Thread-compatible; call before the server is shared.
#ifndef PSYNC_SERVE_RANK_SERVER_H_
#define PSYNC_SERVE_RANK_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace psync::serve {

absl::StatusOr<std::unique_ptr<grpc::Server>> StartRankServer(
    const std::string& listen, std::shared_ptr<grpc::ServerCredentials> credentials,
    int max_receive_message_bytes, grpc::Service* service, int* port);

}  // namespace psync::serve

#endif  // PSYNC_SERVE_RANK_SERVER_H_
