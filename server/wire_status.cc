#include "server/wire_status.h"

#include "absl/strings/str_cat.h"

namespace psync::server {

v1::SessionDown AckFor(uint64_t request_id, const absl::Status& status) {
  v1::SessionDown down;
  down.mutable_ack()->set_request_id(request_id);
  SetWireStatus(status, down.mutable_ack());
  return down;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), BoundEcho(status.message()));
}

}  // namespace psync::server
