#include "serve/rank_server.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/health_check_service_interface.h"
#include "serve/health_status.h"

namespace psync::serve {

absl::StatusOr<std::unique_ptr<grpc::Server>> StartRankServer(
    const std::string& listen, std::shared_ptr<grpc::ServerCredentials> credentials,
    int max_receive_message_bytes, grpc::Service* service, int* port) {
  *port = 0;
  // The standard health service (grpc.health.v1.Health): Kubernetes' gRPC probes ask it.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, std::move(credentials), port);
  builder.SetMaxReceiveMessageSize(max_receive_message_bytes);
  // Keepalive pings find dead peers (a killed rank, a cut network) so their Session ends and the
  // rank's lease starts running, instead of a half-open TCP connection looking alive for hours.
  // Generous enough for clients whose only pending operation is idle (gRPC answers pings from a
  // backup poller every few seconds when nothing else polls). The ranks' own pings are permitted.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // A client that writes and is not read (its stream's queue is over its bound, see
  // stream_writer.h) fills its stream's HTTP/2 receive window, which the server holds in memory.
  // With BDP probing that window grows toward the connection's bandwidth-delay product (about
  // 20 MiB a stream on loopback, measured); without it, it stays at HTTP/2's 64 KiB.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on '", listen, "'"));
  }
  SetServing(server.get(), true);
  return server;
}

}  // namespace psync::serve
