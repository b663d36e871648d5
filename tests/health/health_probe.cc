#include "tests/health/health_probe.h"

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace psync::testing {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

HealthCheck CheckHealth(grpc::health::v1::Health::Stub* stub, const std::string& service) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  const grpc::Status s = stub->Check(&context, request, &response);
  return {s.error_code(), response.status()};
}

HealthWatch::HealthWatch(grpc::health::v1::Health::Stub* stub, const std::string& service) {
  HealthCheckRequest request;
  request.set_service(service);
  reader_ = stub->Watch(&context_, request);
}

HealthStatus HealthWatch::Next() {
  HealthCheckResponse response;
  if (!reader_->Read(&response)) return HealthCheckResponse::UNKNOWN;
  return response.status();
}

grpc::Status HealthWatch::Cancel() {
  context_.TryCancel();
  HealthCheckResponse ignored;
  while (reader_->Read(&ignored)) {
  }
  return reader_->Finish();
}

}  // namespace psync::testing
