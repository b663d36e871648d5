#include "server/health_status.h"

#include <string>

#include "grpcpp/health_check_service_interface.h"

namespace psync::server {

void SetServing(grpc::Server* server, bool serving) {
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (health == nullptr) return;
  for (absl::string_view name : kHealthServices) {
    health->SetServingStatus(std::string(name), serving);
  }
}

}  // namespace psync::server
