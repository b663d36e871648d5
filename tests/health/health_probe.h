// Test helpers for the standard gRPC health service (grpc.health.v1) that psync-coordinator and
// psync-agent serve: one Check call, and a Watch call read from the test thread. For tests only;
// not thread-safe (one test thread drives a HealthWatch).
#ifndef PSYNC_TESTS_HEALTH_HEALTH_PROBE_H_
#define PSYNC_TESTS_HEALTH_HEALTH_PROBE_H_

#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"

namespace psync::testing {

using HealthStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

// The call's status code and, when OK, the serving status of `service` ("" = the server).
struct HealthCheck {
  grpc::StatusCode code;
  HealthStatus status;
};
HealthCheck CheckHealth(grpc::health::v1::Health::Stub* stub, const std::string& service);

class HealthWatch {
 public:
  HealthWatch(grpc::health::v1::Health::Stub* stub, const std::string& service);
  // The next status sent, or UNKNOWN once the call ended.
  HealthStatus Next();
  // Cancels the call and returns its final status.
  grpc::Status Cancel();

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<grpc::health::v1::HealthCheckResponse>> reader_;
};

}  // namespace psync::testing

#endif  // PSYNC_TESTS_HEALTH_HEALTH_PROBE_H_
