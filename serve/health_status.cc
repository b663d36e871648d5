#include "serve/health_status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/health_check_service_interface.h"

namespace psync::serve {

void SetServing(grpc::Server* server, bool serving) {
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (health == nullptr) return;
  for (absl::string_view name : kHealthServices) {
    health->SetServingStatus(std::string(name), serving);
  }
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(const std::string& listen,
                                                                int* port) {
  *port = 0;
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on '", listen, "' (health)"));
  }
  SetServing(server.get(), true);
  return server;
}

}  // namespace psync::serve
